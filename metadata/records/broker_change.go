package records

// UnregisterBrokerRecord (apiKey 1, version 0) removes a broker registration.
type UnregisterBrokerRecord struct {
	BrokerID    int32
	BrokerEpoch int64
}

func (*UnregisterBrokerRecord) Type() Type            { return TypeUnregisterBroker }
func (*UnregisterBrokerRecord) LowestVersion() int16  { return 0 }
func (*UnregisterBrokerRecord) HighestVersion() int16 { return 0 }

// Default resets m to the schema defaults (all zero).
func (m *UnregisterBrokerRecord) Default() { *m = UnregisterBrokerRecord{} }

func (m *UnregisterBrokerRecord) AppendTo(b []byte, version int16) ([]byte, error) {
	if err := checkVersion(m, version); err != nil {
		return b, err
	}
	return appendIDEpoch(b, m.BrokerID, m.BrokerEpoch), nil
}

func (m *UnregisterBrokerRecord) ReadFrom(b []byte, version int16) error {
	if err := checkVersion(m, version); err != nil {
		return err
	}
	var err error
	m.BrokerID, m.BrokerEpoch, err = readIDEpoch(b)
	return err
}

func (m *UnregisterBrokerRecord) writeJSON(o *jsonObject, _ int16) {
	o.add("brokerId", m.BrokerID)
	o.add("brokerEpoch", m.BrokerEpoch)
}

// FenceBrokerRecord (apiKey 7, version 0) fences a broker. Since MV 3.3-IV2
// controllers write BrokerRegistrationChangeRecord instead; older logs still
// hold these.
type FenceBrokerRecord struct {
	ID    int32
	Epoch int64
}

func (*FenceBrokerRecord) Type() Type            { return TypeFenceBroker }
func (*FenceBrokerRecord) LowestVersion() int16  { return 0 }
func (*FenceBrokerRecord) HighestVersion() int16 { return 0 }

// Default resets m to the schema defaults (all zero).
func (m *FenceBrokerRecord) Default() { *m = FenceBrokerRecord{} }

func (m *FenceBrokerRecord) AppendTo(b []byte, version int16) ([]byte, error) {
	if err := checkVersion(m, version); err != nil {
		return b, err
	}
	return appendIDEpoch(b, m.ID, m.Epoch), nil
}

func (m *FenceBrokerRecord) ReadFrom(b []byte, version int16) error {
	if err := checkVersion(m, version); err != nil {
		return err
	}
	var err error
	m.ID, m.Epoch, err = readIDEpoch(b)
	return err
}

func (m *FenceBrokerRecord) writeJSON(o *jsonObject, _ int16) {
	o.add("id", m.ID)
	o.add("epoch", m.Epoch)
}

// UnfenceBrokerRecord (apiKey 8, version 0) unfences a broker; superseded
// like FenceBrokerRecord.
type UnfenceBrokerRecord struct {
	ID    int32
	Epoch int64
}

func (*UnfenceBrokerRecord) Type() Type            { return TypeUnfenceBroker }
func (*UnfenceBrokerRecord) LowestVersion() int16  { return 0 }
func (*UnfenceBrokerRecord) HighestVersion() int16 { return 0 }

// Default resets m to the schema defaults (all zero).
func (m *UnfenceBrokerRecord) Default() { *m = UnfenceBrokerRecord{} }

func (m *UnfenceBrokerRecord) AppendTo(b []byte, version int16) ([]byte, error) {
	if err := checkVersion(m, version); err != nil {
		return b, err
	}
	return appendIDEpoch(b, m.ID, m.Epoch), nil
}

func (m *UnfenceBrokerRecord) ReadFrom(b []byte, version int16) error {
	if err := checkVersion(m, version); err != nil {
		return err
	}
	var err error
	m.ID, m.Epoch, err = readIDEpoch(b)
	return err
}

func (m *UnfenceBrokerRecord) writeJSON(o *jsonObject, _ int16) {
	o.add("id", m.ID)
	o.add("epoch", m.Epoch)
}

// appendIDEpoch and readIDEpoch serve the three schemas that are exactly
// {int32 id, int64 epoch} with no tagged fields.
func appendIDEpoch(b []byte, id int32, epoch int64) []byte {
	return appendNoTags(appendInt64(appendInt32(b, id), epoch))
}

func readIDEpoch(b []byte) (int32, int64, error) {
	r := reader{b: b}
	id, epoch := r.int32(), r.int64()
	r.skipTags()
	return id, epoch, r.done()
}

// BrokerRegistrationChangeRecord (apiKey 17, versions 0-2) changes a broker's
// registration (MV 3.3-IV2+). All changes are tagged and left out at 0/empty.
//
// Version 1 (MV 3.3-IV3) adds InControlledShutdown (tag 1); version 2
// (KIP-858) adds LogDirs (tag 2).
type BrokerRegistrationChangeRecord struct {
	BrokerID    int32
	BrokerEpoch int64
	// Fenced (tag 0): 1 = fenced, -1 = unfenced, 0 = no change.
	Fenced int8
	// InControlledShutdown (tag 1, version 1+): 1 = in controlled shutdown,
	// 0 = no change.
	InControlledShutdown int8
	LogDirs              []UUID // tag 2, version 2+; empty = no change
}

// Values of BrokerRegistrationChangeRecord.Fenced.
const (
	FenceChangeNone    int8 = 0
	FenceChangeFence   int8 = 1
	FenceChangeUnfence int8 = -1
)

func (*BrokerRegistrationChangeRecord) Type() Type            { return TypeBrokerRegistrationChange }
func (*BrokerRegistrationChangeRecord) LowestVersion() int16  { return 0 }
func (*BrokerRegistrationChangeRecord) HighestVersion() int16 { return 2 }

// Default resets m to the schema defaults (all zero: no change).
func (m *BrokerRegistrationChangeRecord) Default() { *m = BrokerRegistrationChangeRecord{} }

func (m *BrokerRegistrationChangeRecord) check(version int16) error {
	if err := checkVersion(m, version); err != nil {
		return err
	}
	switch {
	case version < 1 && m.InControlledShutdown != 0:
		return notInVersion("BrokerRegistrationChangeRecord", "InControlledShutdown", version)
	case version < 2 && len(m.LogDirs) > 0:
		return notInVersion("BrokerRegistrationChangeRecord", "LogDirs", version)
	}
	return nil
}

func (m *BrokerRegistrationChangeRecord) AppendTo(b []byte, version int16) ([]byte, error) {
	if err := m.check(version); err != nil {
		return b, err
	}
	b = appendInt32(b, m.BrokerID)
	b = appendInt64(b, m.BrokerEpoch)
	var tags tagWriter
	if m.Fenced != 0 {
		tags.add(0, func(p []byte) []byte { return appendInt8(p, m.Fenced) })
	}
	if m.InControlledShutdown != 0 {
		tags.add(1, func(p []byte) []byte { return appendInt8(p, m.InControlledShutdown) })
	}
	if len(m.LogDirs) > 0 {
		tags.add(2, func(p []byte) []byte { return appendUUIDs(p, m.LogDirs, false) })
	}
	return tags.appendTo(b), nil
}

func (m *BrokerRegistrationChangeRecord) ReadFrom(b []byte, version int16) error {
	if err := checkVersion(m, version); err != nil {
		return err
	}
	m.Default()
	r := reader{b: b}
	m.BrokerID = r.int32()
	m.BrokerEpoch = r.int64()
	r.tags(func(tag uint32, sub *reader) bool {
		switch {
		case tag == 0:
			m.Fenced = sub.int8()
		case tag == 1 && version < 1, tag == 2 && version < 2:
			return sub.badTag(tag, version)
		case tag == 1:
			m.InControlledShutdown = sub.int8()
		case tag == 2:
			m.LogDirs = sub.uuids(false)
		default:
			return false
		}
		return true
	})
	return r.done()
}

func (m *BrokerRegistrationChangeRecord) writeJSON(o *jsonObject, version int16) {
	o.add("brokerId", m.BrokerID)
	o.add("brokerEpoch", m.BrokerEpoch)
	if m.Fenced != 0 {
		o.add("fenced", m.Fenced)
	}
	if version >= 1 && m.InControlledShutdown != 0 {
		o.add("inControlledShutdown", m.InControlledShutdown)
	}
	if version >= 2 && len(m.LogDirs) > 0 {
		o.add("logDirs", m.LogDirs)
	}
}
