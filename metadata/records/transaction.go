package records

// Metadata transactions (KIP-868, MV 3.6-IV1+) group records that span
// several batches: BeginTransactionRecord, the records, then
// EndTransactionRecord or AbortTransactionRecord. A reader applies the group
// only once it sees the end marker.

// BeginTransactionRecord (apiKey 23, version 0) opens a metadata transaction.
type BeginTransactionRecord struct {
	Name *string // tag 0, optional description; nil = absent
}

func (*BeginTransactionRecord) Type() Type            { return TypeBeginTransaction }
func (*BeginTransactionRecord) LowestVersion() int16  { return 0 }
func (*BeginTransactionRecord) HighestVersion() int16 { return 0 }

// Default resets m to the schema defaults (Name null).
func (m *BeginTransactionRecord) Default() { *m = BeginTransactionRecord{} }

func (m *BeginTransactionRecord) AppendTo(b []byte, version int16) ([]byte, error) {
	if err := checkVersion(m, version); err != nil {
		return b, err
	}
	if err := checkStrings("BeginTransactionRecord", deref(m.Name)); err != nil {
		return b, err
	}
	return appendOptionalStringTag(b, m.Name), nil
}

func (m *BeginTransactionRecord) ReadFrom(b []byte, version int16) error {
	if err := checkVersion(m, version); err != nil {
		return err
	}
	var err error
	m.Name, err = readOptionalStringTag(b)
	return err
}

func (m *BeginTransactionRecord) writeJSON(o *jsonObject, _ int16) {
	if m.Name != nil {
		o.add("name", *m.Name)
	}
}

// EndTransactionRecord (apiKey 24, version 0) commits a metadata transaction.
type EndTransactionRecord struct{}

func (*EndTransactionRecord) Type() Type            { return TypeEndTransaction }
func (*EndTransactionRecord) LowestVersion() int16  { return 0 }
func (*EndTransactionRecord) HighestVersion() int16 { return 0 }

// Default is a no-op: the record has no fields.
func (*EndTransactionRecord) Default() {}

func (m *EndTransactionRecord) AppendTo(b []byte, version int16) ([]byte, error) {
	return appendEmpty(m, b, version)
}

func (m *EndTransactionRecord) ReadFrom(b []byte, version int16) error {
	return readEmpty(m, b, version)
}

func (*EndTransactionRecord) writeJSON(*jsonObject, int16) {}

// AbortTransactionRecord (apiKey 25, version 0) discards a metadata
// transaction.
type AbortTransactionRecord struct {
	Reason *string // tag 0, optional; nil = absent
}

func (*AbortTransactionRecord) Type() Type            { return TypeAbortTransaction }
func (*AbortTransactionRecord) LowestVersion() int16  { return 0 }
func (*AbortTransactionRecord) HighestVersion() int16 { return 0 }

// Default resets m to the schema defaults (Reason null).
func (m *AbortTransactionRecord) Default() { *m = AbortTransactionRecord{} }

func (m *AbortTransactionRecord) AppendTo(b []byte, version int16) ([]byte, error) {
	if err := checkVersion(m, version); err != nil {
		return b, err
	}
	if err := checkStrings("AbortTransactionRecord", deref(m.Reason)); err != nil {
		return b, err
	}
	return appendOptionalStringTag(b, m.Reason), nil
}

func (m *AbortTransactionRecord) ReadFrom(b []byte, version int16) error {
	if err := checkVersion(m, version); err != nil {
		return err
	}
	var err error
	m.Reason, err = readOptionalStringTag(b)
	return err
}

func (m *AbortTransactionRecord) writeJSON(o *jsonObject, _ int16) {
	if m.Reason != nil {
		o.add("reason", *m.Reason)
	}
}

// appendOptionalStringTag writes a body whose only field is a nullable string
// at tag 0, left out while null.
func appendOptionalStringTag(b []byte, s *string) []byte {
	var tags tagWriter
	if s != nil {
		tags.add(0, func(p []byte) []byte { return appendNullableString(p, s) })
	}
	return tags.appendTo(b)
}

func readOptionalStringTag(b []byte) (*string, error) {
	var s *string
	r := reader{b: b}
	r.tags(func(tag uint32, sub *reader) bool {
		if tag != 0 {
			return false
		}
		s = sub.nullableString()
		return true
	})
	return s, r.done()
}
