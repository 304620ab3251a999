package records

// RegisterBrokerRecord (apiKey 0, versions 0-3) registers a broker; the
// offset of this record becomes the broker epoch.
//
// Version 1 (MV 3.3-IV3) adds InControlledShutdown, version 2 (MV 3.4-IV0)
// adds IsMigratingZkBroker, version 3 (KIP-858, MV 3.7-IV2) adds the tagged
// LogDirs (tag 0, left out while empty).
type RegisterBrokerRecord struct {
	BrokerID             int32
	IsMigratingZkBroker  bool // version 2+
	IncarnationID        UUID
	BrokerEpoch          int64
	EndPoints            []BrokerEndpoint
	Features             []BrokerFeature
	Rack                 *string // nil = null
	Fenced               bool    // default true: a new registration starts fenced
	InControlledShutdown bool    // version 1+
	LogDirs              []UUID  // version 3+, tag 0
}

// NewRegisterBrokerRecord returns a RegisterBrokerRecord holding the schema
// defaults (Fenced = true).
func NewRegisterBrokerRecord() *RegisterBrokerRecord {
	m := new(RegisterBrokerRecord)
	m.Default()
	return m
}

func (*RegisterBrokerRecord) Type() Type            { return TypeRegisterBroker }
func (*RegisterBrokerRecord) LowestVersion() int16  { return 0 }
func (*RegisterBrokerRecord) HighestVersion() int16 { return 3 }

// Default resets m to the schema defaults: everything zero except Fenced.
func (m *RegisterBrokerRecord) Default() { *m = RegisterBrokerRecord{Fenced: true} }

func (m *RegisterBrokerRecord) check(version int16) error {
	if err := checkVersion(m, version); err != nil {
		return err
	}
	switch {
	case version < 1 && m.InControlledShutdown:
		return notInVersion("RegisterBrokerRecord", "InControlledShutdown", version)
	case version < 2 && m.IsMigratingZkBroker:
		return notInVersion("RegisterBrokerRecord", "IsMigratingZkBroker", version)
	case version < 3 && len(m.LogDirs) > 0:
		return notInVersion("RegisterBrokerRecord", "LogDirs", version)
	}
	return checkStrings("RegisterBrokerRecord", registrationStrings(m.EndPoints, m.Features, deref(m.Rack))...)
}

func (m *RegisterBrokerRecord) AppendTo(b []byte, version int16) ([]byte, error) {
	if err := m.check(version); err != nil {
		return b, err
	}
	b = appendInt32(b, m.BrokerID)
	if version >= 2 {
		b = appendBool(b, m.IsMigratingZkBroker)
	}
	b = appendUUID(b, m.IncarnationID)
	b = appendInt64(b, m.BrokerEpoch)
	b = appendEndpoints(b, m.EndPoints)
	b = appendFeatures(b, m.Features)
	b = appendNullableString(b, m.Rack)
	b = appendBool(b, m.Fenced)
	if version >= 1 {
		b = appendBool(b, m.InControlledShutdown)
	}
	var tags tagWriter
	if len(m.LogDirs) > 0 { // version 3+, see check
		tags.add(0, func(p []byte) []byte { return appendUUIDs(p, m.LogDirs, false) })
	}
	return tags.appendTo(b), nil
}

func (m *RegisterBrokerRecord) ReadFrom(b []byte, version int16) error {
	if err := checkVersion(m, version); err != nil {
		return err
	}
	m.Default()
	r := reader{b: b}
	m.BrokerID = r.int32()
	if version >= 2 {
		m.IsMigratingZkBroker = r.bool()
	}
	m.IncarnationID = r.uuid()
	m.BrokerEpoch = r.int64()
	m.EndPoints = structs(&r, minEndpointSize, readEndpoint)
	m.Features = structs(&r, minFeatureSize, readFeature)
	m.Rack = r.nullableString()
	m.Fenced = r.bool()
	if version >= 1 {
		m.InControlledShutdown = r.bool()
	}
	r.tags(func(tag uint32, sub *reader) bool {
		switch {
		case tag == 0 && version < 3:
			return sub.badTag(tag, version)
		case tag == 0:
			m.LogDirs = sub.uuids(false)
			return true
		}
		return false
	})
	return r.done()
}

func (m *RegisterBrokerRecord) writeJSON(o *jsonObject, version int16) {
	o.add("brokerId", m.BrokerID)
	if version >= 2 {
		o.add("isMigratingZkBroker", m.IsMigratingZkBroker)
	}
	o.add("incarnationId", m.IncarnationID)
	o.add("brokerEpoch", m.BrokerEpoch)
	o.add("endPoints", jsonArray(m.EndPoints, endpointJSON))
	o.add("features", jsonArray(m.Features, featureJSON))
	o.add("rack", m.Rack)
	o.add("fenced", m.Fenced)
	if version >= 1 {
		o.add("inControlledShutdown", m.InControlledShutdown)
	}
	if version >= 3 && len(m.LogDirs) > 0 {
		o.add("logDirs", m.LogDirs)
	}
}

// RegisterControllerRecord (apiKey 27, version 0) registers a controller
// (KIP-919, MV 3.7-IV0).
type RegisterControllerRecord struct {
	ControllerID     int32
	IncarnationID    UUID
	ZkMigrationReady bool
	EndPoints        []ControllerEndpoint
	Features         []ControllerFeature
}

func (*RegisterControllerRecord) Type() Type            { return TypeRegisterController }
func (*RegisterControllerRecord) LowestVersion() int16  { return 0 }
func (*RegisterControllerRecord) HighestVersion() int16 { return 0 }

// Default resets m to the schema defaults (all zero).
func (m *RegisterControllerRecord) Default() { *m = RegisterControllerRecord{} }

func (m *RegisterControllerRecord) AppendTo(b []byte, version int16) ([]byte, error) {
	if err := checkVersion(m, version); err != nil {
		return b, err
	}
	if err := checkStrings("RegisterControllerRecord", registrationStrings(m.EndPoints, m.Features)...); err != nil {
		return b, err
	}
	b = appendInt32(b, m.ControllerID)
	b = appendUUID(b, m.IncarnationID)
	b = appendBool(b, m.ZkMigrationReady)
	b = appendEndpoints(b, m.EndPoints)
	b = appendFeatures(b, m.Features)
	return appendNoTags(b), nil
}

func (m *RegisterControllerRecord) ReadFrom(b []byte, version int16) error {
	if err := checkVersion(m, version); err != nil {
		return err
	}
	m.Default()
	r := reader{b: b}
	m.ControllerID = r.int32()
	m.IncarnationID = r.uuid()
	m.ZkMigrationReady = r.bool()
	m.EndPoints = structs(&r, minEndpointSize, readEndpoint)
	m.Features = structs(&r, minFeatureSize, readFeature)
	r.skipTags()
	return r.done()
}

func (m *RegisterControllerRecord) writeJSON(o *jsonObject, _ int16) {
	o.add("controllerId", m.ControllerID)
	o.add("incarnationId", m.IncarnationID)
	o.add("zkMigrationReady", m.ZkMigrationReady)
	o.add("endPoints", jsonArray(m.EndPoints, endpointJSON))
	o.add("features", jsonArray(m.Features, featureJSON))
}
