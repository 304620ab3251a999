package records

// PartitionRecord (apiKey 3, versions 0-2) is the full state of one partition.
//
// Version 1 (KIP-858, MV 3.7-IV2) adds Directories, one log directory per
// replica, as a positional field. Version 2 (KIP-966) adds the tagged
// EligibleLeaderReplicas and LastKnownELR. LeaderRecoveryState is tagged in
// every version and left out while 0.
type PartitionRecord struct {
	PartitionID         int32 // default -1
	TopicID             UUID
	Replicas            []int32
	ISR                 []int32
	RemovingReplicas    []int32
	AddingReplicas      []int32
	Leader              int32 // default -1 (no leader)
	LeaderRecoveryState int8  // tag 0; 1 while recovering from an unclean election
	LeaderEpoch         int32 // default -1
	PartitionEpoch      int32 // default -1
	Directories         []UUID
	// EligibleLeaderReplicas and LastKnownELR are nullable (nil = null),
	// tags 1 and 2, version 2+.
	EligibleLeaderReplicas []int32
	LastKnownELR           []int32
}

// NewPartitionRecord returns a PartitionRecord holding the schema defaults.
func NewPartitionRecord() *PartitionRecord {
	m := new(PartitionRecord)
	m.Default()
	return m
}

func (*PartitionRecord) Type() Type            { return TypePartition }
func (*PartitionRecord) LowestVersion() int16  { return 0 }
func (*PartitionRecord) HighestVersion() int16 { return 2 }

// Default resets m to the schema defaults: ids and epochs -1, slices empty.
func (m *PartitionRecord) Default() {
	*m = PartitionRecord{PartitionID: -1, Leader: -1, LeaderEpoch: -1, PartitionEpoch: -1}
}

func (m *PartitionRecord) check(version int16) error {
	if err := checkVersion(m, version); err != nil {
		return err
	}
	switch {
	case version < 1 && len(m.Directories) > 0:
		return notInVersion("PartitionRecord", "Directories", version)
	case version < 2 && m.EligibleLeaderReplicas != nil:
		return notInVersion("PartitionRecord", "EligibleLeaderReplicas", version)
	case version < 2 && m.LastKnownELR != nil:
		return notInVersion("PartitionRecord", "LastKnownELR", version)
	}
	return nil
}

func (m *PartitionRecord) AppendTo(b []byte, version int16) ([]byte, error) {
	if err := m.check(version); err != nil {
		return b, err
	}
	b = appendInt32(b, m.PartitionID)
	b = appendUUID(b, m.TopicID)
	b = appendInt32s(b, m.Replicas, false)
	b = appendInt32s(b, m.ISR, false)
	b = appendInt32s(b, m.RemovingReplicas, false)
	b = appendInt32s(b, m.AddingReplicas, false)
	b = appendInt32(b, m.Leader)
	b = appendInt32(b, m.LeaderEpoch)
	b = appendInt32(b, m.PartitionEpoch)
	if version >= 1 {
		b = appendUUIDs(b, m.Directories, false)
	}
	var tags tagWriter
	if m.LeaderRecoveryState != 0 {
		tags.add(0, func(p []byte) []byte { return appendInt8(p, m.LeaderRecoveryState) })
	}
	if version >= 2 && m.EligibleLeaderReplicas != nil {
		tags.add(1, func(p []byte) []byte { return appendInt32s(p, m.EligibleLeaderReplicas, true) })
	}
	if version >= 2 && m.LastKnownELR != nil {
		tags.add(2, func(p []byte) []byte { return appendInt32s(p, m.LastKnownELR, true) })
	}
	return tags.appendTo(b), nil
}

func (m *PartitionRecord) ReadFrom(b []byte, version int16) error {
	return m.readFrom(reader{b: b}, version)
}

func (m *PartitionRecord) readFrom(r reader, version int16) error {
	if err := checkVersion(m, version); err != nil {
		return err
	}
	m.Default()
	m.PartitionID = r.int32()
	m.TopicID = r.uuid()
	m.Replicas = r.int32s(false)
	m.ISR = r.int32s(false)
	m.RemovingReplicas = r.int32s(false)
	m.AddingReplicas = r.int32s(false)
	m.Leader = r.int32()
	m.LeaderEpoch = r.int32()
	m.PartitionEpoch = r.int32()
	if version >= 1 {
		m.Directories = r.uuids(false)
	}
	ts := r.tagSection()
	for tag, sub, ok := ts.next(); ok; tag, sub, ok = ts.next() {
		switch {
		case tag == 0:
			m.LeaderRecoveryState = sub.int8()
		case (tag == 1 || tag == 2) && version < 2:
			sub.badTag(tag, version)
		case tag == 1:
			m.EligibleLeaderReplicas = sub.int32s(true)
		case tag == 2:
			m.LastKnownELR = sub.int32s(true)
		default:
			continue // unknown tags are skipped
		}
		ts.check(tag, &sub)
	}
	return r.done()
}

func (m *PartitionRecord) writeJSON(o *jsonObject, version int16) {
	o.add("partitionId", m.PartitionID)
	o.add("topicId", m.TopicID)
	o.add("replicas", orEmpty(m.Replicas))
	o.add("isr", orEmpty(m.ISR))
	o.add("removingReplicas", orEmpty(m.RemovingReplicas))
	o.add("addingReplicas", orEmpty(m.AddingReplicas))
	o.add("leader", m.Leader)
	if m.LeaderRecoveryState != 0 {
		o.add("leaderRecoveryState", m.LeaderRecoveryState)
	}
	o.add("leaderEpoch", m.LeaderEpoch)
	o.add("partitionEpoch", m.PartitionEpoch)
	if version >= 1 {
		o.add("directories", orEmpty(m.Directories))
	}
	if version >= 2 && m.EligibleLeaderReplicas != nil {
		o.add("eligibleLeaderReplicas", m.EligibleLeaderReplicas)
	}
	if version >= 2 && m.LastKnownELR != nil {
		o.add("lastKnownElr", m.LastKnownELR)
	}
}
