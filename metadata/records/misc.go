package records

// ConfigRecord (apiKey 4, version 0) sets or (Value nil) deletes one dynamic
// configuration key.
type ConfigRecord struct {
	// ResourceType is Kafka's ConfigResource.Type id: 2 topic, 4 broker,
	// 8 broker logger, ...
	ResourceType int8
	// ResourceName is the topic or broker id; "" is the cluster-wide broker
	// default.
	ResourceName string
	Name         string
	Value        *string // nil = delete the key
}

func (*ConfigRecord) Type() Type            { return TypeConfig }
func (*ConfigRecord) LowestVersion() int16  { return 0 }
func (*ConfigRecord) HighestVersion() int16 { return 0 }

// Default resets m to the schema defaults (all zero; Value "").
func (m *ConfigRecord) Default() { *m = ConfigRecord{} }

func (m *ConfigRecord) AppendTo(b []byte, version int16) ([]byte, error) {
	if err := checkVersion(m, version); err != nil {
		return b, err
	}
	if err := checkStrings("ConfigRecord", m.ResourceName, m.Name, deref(m.Value)); err != nil {
		return b, err
	}
	b = appendInt8(b, m.ResourceType)
	b = appendString(b, m.ResourceName)
	b = appendString(b, m.Name)
	b = appendNullableString(b, m.Value)
	return appendNoTags(b), nil
}

func (m *ConfigRecord) ReadFrom(b []byte, version int16) error {
	if err := checkVersion(m, version); err != nil {
		return err
	}
	m.Default()
	r := reader{b: b}
	m.ResourceType = r.int8()
	m.ResourceName = r.string()
	m.Name = r.string()
	m.Value = r.nullableString()
	r.skipTags()
	return r.done()
}

func (m *ConfigRecord) writeJSON(o *jsonObject, _ int16) {
	o.add("resourceType", m.ResourceType)
	o.add("resourceName", m.ResourceName)
	o.add("name", m.Name)
	o.add("value", m.Value)
}

// FeatureLevelRecord (apiKey 12, version 0) finalises a feature level, e.g.
// metadata.version. Level 0 removes the feature. Kafka pins this record at
// version 0 forever because it is what tells a reader how to read the rest.
type FeatureLevelRecord struct {
	Name         string
	FeatureLevel int16
}

func (*FeatureLevelRecord) Type() Type            { return TypeFeatureLevel }
func (*FeatureLevelRecord) LowestVersion() int16  { return 0 }
func (*FeatureLevelRecord) HighestVersion() int16 { return 0 }

// Default resets m to the schema defaults (all zero).
func (m *FeatureLevelRecord) Default() { *m = FeatureLevelRecord{} }

func (m *FeatureLevelRecord) AppendTo(b []byte, version int16) ([]byte, error) {
	if err := checkVersion(m, version); err != nil {
		return b, err
	}
	if err := checkStrings("FeatureLevelRecord", m.Name); err != nil {
		return b, err
	}
	b = appendString(b, m.Name)
	b = appendInt16(b, m.FeatureLevel)
	return appendNoTags(b), nil
}

func (m *FeatureLevelRecord) ReadFrom(b []byte, version int16) error {
	if err := checkVersion(m, version); err != nil {
		return err
	}
	m.Default()
	r := reader{b: b}
	m.Name = r.string()
	m.FeatureLevel = r.int16()
	r.skipTags()
	return r.done()
}

func (m *FeatureLevelRecord) writeJSON(o *jsonObject, _ int16) {
	o.add("name", m.Name)
	o.add("featureLevel", m.FeatureLevel)
}

// ProducerIdsRecord (apiKey 15, version 0) hands a block of producer ids to a
// broker; NextProducerID is the first id of the following block.
type ProducerIdsRecord struct {
	BrokerID       int32
	BrokerEpoch    int64 // default -1
	NextProducerID int64
}

// NewProducerIdsRecord returns a ProducerIdsRecord holding the schema
// defaults (BrokerEpoch = -1).
func NewProducerIdsRecord() *ProducerIdsRecord {
	m := new(ProducerIdsRecord)
	m.Default()
	return m
}

func (*ProducerIdsRecord) Type() Type            { return TypeProducerIds }
func (*ProducerIdsRecord) LowestVersion() int16  { return 0 }
func (*ProducerIdsRecord) HighestVersion() int16 { return 0 }

// Default resets m to the schema defaults (BrokerEpoch -1, rest zero).
func (m *ProducerIdsRecord) Default() { *m = ProducerIdsRecord{BrokerEpoch: -1} }

func (m *ProducerIdsRecord) AppendTo(b []byte, version int16) ([]byte, error) {
	if err := checkVersion(m, version); err != nil {
		return b, err
	}
	b = appendInt32(b, m.BrokerID)
	b = appendInt64(b, m.BrokerEpoch)
	b = appendInt64(b, m.NextProducerID)
	return appendNoTags(b), nil
}

func (m *ProducerIdsRecord) ReadFrom(b []byte, version int16) error {
	if err := checkVersion(m, version); err != nil {
		return err
	}
	m.Default()
	r := reader{b: b}
	m.BrokerID = r.int32()
	m.BrokerEpoch = r.int64()
	m.NextProducerID = r.int64()
	r.skipTags()
	return r.done()
}

func (m *ProducerIdsRecord) writeJSON(o *jsonObject, _ int16) {
	o.add("brokerId", m.BrokerID)
	o.add("brokerEpoch", m.BrokerEpoch)
	o.add("nextProducerId", m.NextProducerID)
}

// NoOpRecord (apiKey 20, version 0) has an empty body. The active controller
// appends one periodically (MV 3.3-IV1+) so that the high watermark and
// brokers' fetch offsets keep moving on an idle cluster.
type NoOpRecord struct{}

func (*NoOpRecord) Type() Type            { return TypeNoOp }
func (*NoOpRecord) LowestVersion() int16  { return 0 }
func (*NoOpRecord) HighestVersion() int16 { return 0 }

// Default is a no-op: the record has no fields.
func (*NoOpRecord) Default() {}

func (m *NoOpRecord) AppendTo(b []byte, version int16) ([]byte, error) {
	return appendEmpty(m, b, version)
}

func (m *NoOpRecord) ReadFrom(b []byte, version int16) error { return readEmpty(m, b, version) }

func (*NoOpRecord) writeJSON(*jsonObject, int16) {}

// appendEmpty and readEmpty serve schemas with no fields: the body is just
// an empty tag section.
func appendEmpty(m Message, b []byte, version int16) ([]byte, error) {
	if err := checkVersion(m, version); err != nil {
		return b, err
	}
	return appendNoTags(b), nil
}

func readEmpty(m Message, b []byte, version int16) error {
	if err := checkVersion(m, version); err != nil {
		return err
	}
	r := reader{b: b}
	r.skipTags()
	return r.done()
}
