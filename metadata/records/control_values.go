package records

import (
	"encoding/json"
	"fmt"
)

// LeaderChangeMessage (control type 2, schema versions 0-1) is the first
// record a new leader writes in its epoch; committing it lets the leader
// establish a high watermark.
//
// The schema version is the Version field, as in kmsg: version 1 (KIP-853)
// adds Voter.VoterDirectoryID. Kafka itself still writes version 0, where
// directory ids are not on the wire: AppendTo drops them at Version 0.
type LeaderChangeMessage struct {
	Version        int16
	LeaderID       int32
	Voters         []Voter // voters of the epoch
	GrantingVoters []Voter // voters that granted the election
}

// Voter is LeaderChangeMessage's common Voter struct.
type Voter struct {
	VoterID          int32
	VoterDirectoryID UUID // schema version 1+
}

// leaderChangeMaxVersion is the newest LeaderChangeMessage schema we know.
const leaderChangeMaxVersion = 1

// ControlType returns ControlLeaderChange.
func (*LeaderChangeMessage) ControlType() ControlType { return ControlLeaderChange }

// AppendTo appends the body at schema version m.Version, which must be 0 or
// 1 for the result to decode (ReadFrom rejects other versions).
func (m *LeaderChangeMessage) AppendTo(b []byte) []byte {
	withDirs := m.Version >= 1
	b = appendInt16(b, m.Version)
	b = appendInt32(b, m.LeaderID)
	b = appendVoters(b, m.Voters, withDirs)
	b = appendVoters(b, m.GrantingVoters, withDirs)
	return appendNoTags(b)
}

func appendVoters(b []byte, vs []Voter, withDirs bool) []byte {
	b = appendArrayLen(b, len(vs), false)
	for _, v := range vs {
		b = appendInt32(b, v.VoterID)
		if withDirs {
			b = appendUUID(b, v.VoterDirectoryID)
		}
		b = appendNoTags(b)
	}
	return b
}

// ReadFrom decodes a body; the leading Version selects the schema version.
func (m *LeaderChangeMessage) ReadFrom(b []byte) error {
	*m = LeaderChangeMessage{}
	r := reader{b: b}
	m.Version = r.int16()
	if r.err == nil && (m.Version < 0 || m.Version > leaderChangeMaxVersion) {
		return fmt.Errorf("%w: LeaderChangeMessage version %d (valid 0-%d)",
			ErrUnsupportedVersion, m.Version, leaderChangeMaxVersion)
	}
	m.LeaderID = r.int32()
	m.Voters = readVoters(&r, m.Version >= 1)
	m.GrantingVoters = readVoters(&r, m.Version >= 1)
	r.skipTags()
	return r.done()
}

func readVoters(r *reader, withDirs bool) []Voter {
	size := 4 + 1
	if withDirs {
		size += 16
	}
	return structs(r, size, func(r *reader, v *Voter) {
		v.VoterID = r.int32()
		if withDirs {
			v.VoterDirectoryID = r.uuid()
		}
		r.skipTags()
	})
}

// MarshalJSON prints the message as LeaderChangeMessageJsonConverter does.
func (m *LeaderChangeMessage) MarshalJSON() ([]byte, error) {
	voter := func(o *jsonObject, v *Voter) {
		o.add("voterId", v.VoterID)
		if m.Version >= 1 {
			o.add("voterDirectoryId", v.VoterDirectoryID)
		}
	}
	var o jsonObject
	o.add("version", m.Version)
	o.add("leaderId", m.LeaderID)
	o.add("voters", jsonArray(m.Voters, voter))
	o.add("grantingVoters", jsonArray(m.GrantingVoters, voter))
	return o.bytes()
}

// SnapshotHeaderRecord (control type 3, schema version 0) is the first
// record of every snapshot.
type SnapshotHeaderRecord struct {
	Version                   int16
	LastContainedLogTimestamp int64 // append time of the last record in the snapshot
}

// ControlType returns ControlSnapshotHeader.
func (*SnapshotHeaderRecord) ControlType() ControlType { return ControlSnapshotHeader }

// AppendTo appends the body. Kafka reads every control value at schema
// version 0 whatever its Version field says, so Version is only data here.
func (m *SnapshotHeaderRecord) AppendTo(b []byte) []byte {
	return appendNoTags(appendInt64(appendInt16(b, m.Version), m.LastContainedLogTimestamp))
}

// ReadFrom decodes a body at schema version 0.
func (m *SnapshotHeaderRecord) ReadFrom(b []byte) error {
	r := reader{b: b}
	*m = SnapshotHeaderRecord{Version: r.int16(), LastContainedLogTimestamp: r.int64()}
	r.skipTags()
	return r.done()
}

// MarshalJSON prints the record as SnapshotHeaderRecordJsonConverter does.
func (m *SnapshotHeaderRecord) MarshalJSON() ([]byte, error) {
	var o jsonObject
	o.add("version", m.Version)
	o.add("lastContainedLogTimestamp", m.LastContainedLogTimestamp)
	return o.bytes()
}

// SnapshotFooterRecord (control type 4, schema version 0) is the last record
// of every snapshot.
type SnapshotFooterRecord struct {
	Version int16
}

// ControlType returns ControlSnapshotFooter.
func (*SnapshotFooterRecord) ControlType() ControlType { return ControlSnapshotFooter }

// AppendTo appends the body (schema version 0).
func (m *SnapshotFooterRecord) AppendTo(b []byte) []byte {
	return appendNoTags(appendInt16(b, m.Version))
}

// ReadFrom decodes a body at schema version 0.
func (m *SnapshotFooterRecord) ReadFrom(b []byte) error {
	r := reader{b: b}
	*m = SnapshotFooterRecord{Version: r.int16()}
	r.skipTags()
	return r.done()
}

// MarshalJSON prints the record as SnapshotFooterRecordJsonConverter does.
func (m *SnapshotFooterRecord) MarshalJSON() ([]byte, error) {
	var o jsonObject
	o.add("version", m.Version)
	return o.bytes()
}

// KRaftVersionRecord (control type 5, schema version 0) sets the
// kraft.version feature: 0 = static voters, 1 = dynamic voters (KIP-853).
type KRaftVersionRecord struct {
	Version      int16
	KRaftVersion int16
}

// ControlType returns ControlKRaftVersion.
func (*KRaftVersionRecord) ControlType() ControlType { return ControlKRaftVersion }

// AppendTo appends the body (schema version 0).
func (m *KRaftVersionRecord) AppendTo(b []byte) []byte {
	return appendNoTags(appendInt16(appendInt16(b, m.Version), m.KRaftVersion))
}

// ReadFrom decodes a body at schema version 0.
func (m *KRaftVersionRecord) ReadFrom(b []byte) error {
	r := reader{b: b}
	*m = KRaftVersionRecord{Version: r.int16(), KRaftVersion: r.int16()}
	r.skipTags()
	return r.done()
}

// MarshalJSON prints the record as KRaftVersionRecordJsonConverter does.
func (m *KRaftVersionRecord) MarshalJSON() ([]byte, error) {
	var o jsonObject
	o.add("version", m.Version)
	o.add("kRaftVersion", m.KRaftVersion)
	return o.bytes()
}

// VotersRecord (control type 6, schema version 0) is the full voter set
// (KIP-853). The latest one in the log takes effect as soon as it is
// appended, before it commits.
type VotersRecord struct {
	Version int16
	Voters  []VotersRecordVoter
}

// VotersRecordVoter is one voter of a VotersRecord.
type VotersRecordVoter struct {
	VoterID             int32
	VoterDirectoryID    UUID
	Endpoints           []VotersRecordEndpoint
	KRaftVersionFeature KRaftVersionFeature
}

// VotersRecordEndpoint is one listener of a voter.
type VotersRecordEndpoint struct {
	Name string
	Host string
	Port uint16
}

// KRaftVersionFeature is the kraft.version range a voter supports.
type KRaftVersionFeature struct {
	MinSupportedVersion int16
	MaxSupportedVersion int16
}

// Smallest encodings of a voter (id, directory id, empty endpoints, feature
// struct with its tag byte, own tag byte) and of an endpoint.
const (
	minVotersRecordVoterSize    = 4 + 16 + 1 + 2 + 2 + 1 + 1
	minVotersRecordEndpointSize = 1 + 1 + 2 + 1
)

// ControlType returns ControlKRaftVoters.
func (*VotersRecord) ControlType() ControlType { return ControlKRaftVoters }

// AppendTo appends the body (schema version 0). Endpoint names and hosts
// must fit Kafka's 32767-byte string limit; this is not checked here.
func (m *VotersRecord) AppendTo(b []byte) []byte {
	b = appendInt16(b, m.Version)
	b = appendArrayLen(b, len(m.Voters), false)
	for _, v := range m.Voters {
		b = appendInt32(b, v.VoterID)
		b = appendUUID(b, v.VoterDirectoryID)
		b = appendArrayLen(b, len(v.Endpoints), false)
		for _, e := range v.Endpoints {
			b = appendString(b, e.Name)
			b = appendString(b, e.Host)
			b = appendNoTags(appendUint16(b, e.Port))
		}
		b = appendInt16(b, v.KRaftVersionFeature.MinSupportedVersion)
		b = appendInt16(b, v.KRaftVersionFeature.MaxSupportedVersion)
		b = appendNoTags(appendNoTags(b)) // feature struct, then voter
	}
	return appendNoTags(b)
}

// ReadFrom decodes a body at schema version 0.
func (m *VotersRecord) ReadFrom(b []byte) error {
	r := reader{b: b}
	*m = VotersRecord{Version: r.int16()}
	m.Voters = structs(&r, minVotersRecordVoterSize, readVotersRecordVoter)
	r.skipTags()
	return r.done()
}

func readVotersRecordVoter(r *reader, v *VotersRecordVoter) {
	v.VoterID = r.int32()
	v.VoterDirectoryID = r.uuid()
	v.Endpoints = structs(r, minVotersRecordEndpointSize, func(r *reader, e *VotersRecordEndpoint) {
		e.Name = r.string()
		e.Host = r.string()
		e.Port = r.uint16()
		r.skipTags()
	})
	v.KRaftVersionFeature.MinSupportedVersion = r.int16()
	v.KRaftVersionFeature.MaxSupportedVersion = r.int16()
	r.skipTags() // feature struct
	r.skipTags() // voter
}

// MarshalJSON prints the record as VotersRecordJsonConverter does.
func (m *VotersRecord) MarshalJSON() ([]byte, error) {
	var o jsonObject
	o.add("version", m.Version)
	o.add("voters", jsonArray(m.Voters, func(o *jsonObject, v *VotersRecordVoter) {
		o.add("voterId", v.VoterID)
		o.add("voterDirectoryId", v.VoterDirectoryID)
		o.add("endpoints", jsonArray(v.Endpoints, func(o *jsonObject, e *VotersRecordEndpoint) {
			o.add("name", e.Name)
			o.add("host", e.Host)
			o.add("port", e.Port)
		}))
		var f jsonObject
		f.add("minSupportedVersion", v.KRaftVersionFeature.MinSupportedVersion)
		f.add("maxSupportedVersion", v.KRaftVersionFeature.MaxSupportedVersion)
		raw, _ := f.bytes()
		o.add("kRaftVersionFeature", json.RawMessage(raw))
	}))
	return o.bytes()
}
