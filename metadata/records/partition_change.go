package records

// PartitionChangeRecord (apiKey 5, versions 0-2) changes some of a
// partition's state. Every field after TopicID is tagged and left out when it
// holds its "unchanged" default, so a nil slice means "unchanged" and an empty
// non-nil slice means "now empty".
//
// Applying it bumps PartitionEpoch always and LeaderEpoch whenever Leader is
// not -2 (the controller sets Leader to the current leader to force a bump).
// Version 1 (KIP-858) adds Directories (tag 8); version 2 (KIP-966) adds
// EligibleLeaderReplicas (tag 6) and LastKnownELR (tag 7).
type PartitionChangeRecord struct {
	PartitionID            int32 // default -1
	TopicID                UUID
	ISR                    []int32 // tag 0, nil = unchanged
	Leader                 int32   // tag 1; -2 = unchanged (default), -1 = no leader
	Replicas               []int32 // tag 2, nil = unchanged
	RemovingReplicas       []int32 // tag 3, nil = unchanged
	AddingReplicas         []int32 // tag 4, nil = unchanged
	LeaderRecoveryState    int8    // tag 5; -1 = unchanged (default)
	Directories            []UUID  // tag 8, version 1+, nil = unchanged
	EligibleLeaderReplicas []int32 // tag 6, version 2+, nil = unchanged
	LastKnownELR           []int32 // tag 7, version 2+, nil = unchanged
}

// Defaults of PartitionChangeRecord's tagged scalars, meaning "no change".
const (
	NoLeaderChange              int32 = -2
	NoLeaderRecoveryStateChange int8  = -1
)

// NewPartitionChangeRecord returns a PartitionChangeRecord that changes
// nothing (Leader -2, LeaderRecoveryState -1, all slices nil).
func NewPartitionChangeRecord() *PartitionChangeRecord {
	m := new(PartitionChangeRecord)
	m.Default()
	return m
}

func (*PartitionChangeRecord) Type() Type            { return TypePartitionChange }
func (*PartitionChangeRecord) LowestVersion() int16  { return 0 }
func (*PartitionChangeRecord) HighestVersion() int16 { return 2 }

// Default resets m to the schema defaults, which describe no change.
func (m *PartitionChangeRecord) Default() {
	*m = PartitionChangeRecord{
		PartitionID:         -1,
		Leader:              NoLeaderChange,
		LeaderRecoveryState: NoLeaderRecoveryStateChange,
	}
}

func (m *PartitionChangeRecord) check(version int16) error {
	if err := checkVersion(m, version); err != nil {
		return err
	}
	switch {
	case version < 1 && m.Directories != nil:
		return notInVersion("PartitionChangeRecord", "Directories", version)
	case version < 2 && m.EligibleLeaderReplicas != nil:
		return notInVersion("PartitionChangeRecord", "EligibleLeaderReplicas", version)
	case version < 2 && m.LastKnownELR != nil:
		return notInVersion("PartitionChangeRecord", "LastKnownELR", version)
	}
	return nil
}

func (m *PartitionChangeRecord) AppendTo(b []byte, version int16) ([]byte, error) {
	if err := m.check(version); err != nil {
		return b, err
	}
	b = appendInt32(b, m.PartitionID)
	b = appendUUID(b, m.TopicID)
	// The tagged fields go straight into b, each size computed up front: a
	// controlled shutdown at 1M partitions encodes a million of these, and
	// a tagWriter's per-field buffers were most of their cost.
	n := 0
	for _, vs := range [...][]int32{m.ISR, m.Replicas, m.RemovingReplicas, m.AddingReplicas,
		m.EligibleLeaderReplicas, m.LastKnownELR} {
		if vs != nil {
			n++
		}
	}
	if m.Leader != NoLeaderChange {
		n++
	}
	if m.LeaderRecoveryState != NoLeaderRecoveryStateChange {
		n++
	}
	if m.Directories != nil {
		n++
	}
	b = appendUvarint(b, uint64(n))
	b = appendInt32sTag(b, 0, m.ISR)
	if m.Leader != NoLeaderChange {
		b = appendInt32(append(b, 1, 4), m.Leader)
	}
	b = appendInt32sTag(b, 2, m.Replicas)
	b = appendInt32sTag(b, 3, m.RemovingReplicas)
	b = appendInt32sTag(b, 4, m.AddingReplicas)
	if m.LeaderRecoveryState != NoLeaderRecoveryStateChange {
		b = appendInt8(append(b, 5, 1), m.LeaderRecoveryState)
	}
	b = appendInt32sTag(b, 6, m.EligibleLeaderReplicas) // nil below version 2, see check
	b = appendInt32sTag(b, 7, m.LastKnownELR)
	if m.Directories != nil {
		b = appendUvarint(append(b, 8), uint64(uvarintLen(uint64(len(m.Directories))+1)+16*len(m.Directories)))
		b = appendUUIDs(b, m.Directories, true)
	}
	return b, nil
}

// appendInt32sTag writes vs as the tagged field tag (a compact array),
// nothing when vs is nil.
func appendInt32sTag(b []byte, tag uint32, vs []int32) []byte {
	if vs == nil {
		return b
	}
	b = appendUvarint(b, uint64(tag))
	b = appendUvarint(b, uint64(uvarintLen(uint64(len(vs))+1)+4*len(vs)))
	return appendInt32s(b, vs, true)
}

// uvarintLen is the encoded length of v as an unsigned varint.
func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

func (m *PartitionChangeRecord) ReadFrom(b []byte, version int16) error {
	return m.readFrom(reader{b: b}, version)
}

func (m *PartitionChangeRecord) readFrom(r reader, version int16) error {
	if err := checkVersion(m, version); err != nil {
		return err
	}
	m.Default()
	m.PartitionID = r.int32()
	m.TopicID = r.uuid()
	ts := r.tagSection()
	for tag, sub, ok := ts.next(); ok; tag, sub, ok = ts.next() {
		switch {
		case tag == 0:
			m.ISR = sub.int32s(true)
		case tag == 1:
			m.Leader = sub.int32()
		case tag == 2:
			m.Replicas = sub.int32s(true)
		case tag == 3:
			m.RemovingReplicas = sub.int32s(true)
		case tag == 4:
			m.AddingReplicas = sub.int32s(true)
		case tag == 5:
			m.LeaderRecoveryState = sub.int8()
		case (tag == 6 || tag == 7) && version < 2, tag == 8 && version < 1:
			sub.badTag(tag, version)
		case tag == 6:
			m.EligibleLeaderReplicas = sub.int32s(true)
		case tag == 7:
			m.LastKnownELR = sub.int32s(true)
		case tag == 8:
			m.Directories = sub.uuids(true)
		default:
			continue // unknown tags are skipped
		}
		ts.check(tag, &sub)
	}
	return r.done()
}

func (m *PartitionChangeRecord) writeJSON(o *jsonObject, version int16) {
	o.add("partitionId", m.PartitionID)
	o.add("topicId", m.TopicID)
	addIf := func(name string, vs []int32) {
		if vs != nil {
			o.add(name, vs)
		}
	}
	addIf("isr", m.ISR)
	if m.Leader != NoLeaderChange {
		o.add("leader", m.Leader)
	}
	addIf("replicas", m.Replicas)
	addIf("removingReplicas", m.RemovingReplicas)
	addIf("addingReplicas", m.AddingReplicas)
	if m.LeaderRecoveryState != NoLeaderRecoveryStateChange {
		o.add("leaderRecoveryState", m.LeaderRecoveryState)
	}
	if version >= 1 && m.Directories != nil {
		o.add("directories", m.Directories)
	}
	if version >= 2 {
		addIf("eligibleLeaderReplicas", m.EligibleLeaderReplicas)
		addIf("lastKnownElr", m.LastKnownELR)
	}
}
