package quorum

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kbin"

	"github.com/kraftd/kraftd/quorum/raftlog"
)

// KIP-853 voter sets. At kraft.version 1 the voters are not configured: they are
// the last VotersRecord (control type 6) in the log or the latest snapshot,
// committed or not, and a voter is a replica key (node id plus the directory id of
// its metadata log directory), so a controller whose disk was replaced is a new
// replica. The records are control records, not metadata records, so the quorum
// encodes them itself (package quorum may not import metadata/records, which has
// the same codecs for `kraftd metadata dump`).

// ErrInvalidControlRecord: a KRaftVersion or Voters control record that does not
// decode, or whose contents no voter set can have.
var ErrInvalidControlRecord = errors.New("quorum: invalid control record")

// KRaft versions (the kraft.version feature levels).
const (
	// KRaftVersionStatic is kraft.version 0: the voter set is
	// controller.quorum.voters and no control record names it.
	KRaftVersionStatic int16 = 0
	// KRaftVersionDynamic is kraft.version 1 (KIP-853): the voter set is the last
	// VotersRecord.
	KRaftVersionDynamic int16 = 1
	// KRaftVersionMax is the highest kraft.version this node supports.
	KRaftVersionMax = KRaftVersionDynamic
)

// ReplicaKey names a replica of the metadata partition. DirectoryID is the
// directory.id of its metadata log directory; the zero UUID means unknown (the
// static voters of kraft.version 0).
type ReplicaKey struct {
	ID          int32
	DirectoryID [16]byte
}

// Endpoint is one listener of a voter (VotersRecord Endpoints, the Listeners of
// AddRaftVoter and UpdateRaftVoter).
type Endpoint struct {
	Name string
	Host string
	Port uint16
}

// VoterNode is one voter: its replica key, its listeners and the kraft.version
// range it supports.
type VoterNode struct {
	Key             ReplicaKey
	Endpoints       []Endpoint
	KRaftVersionMin int16
	KRaftVersionMax int16
}

// VoterSet is a set of voters.
//
// INVARIANTS: Voters is sorted by id, ids are unique and >= 0, and a VoterSet
// decoded from a record or built by NewVoterSet is never empty.
type VoterSet struct {
	Voters []VoterNode
}

// NewVoterSet sorts voters by id and checks them: at least one, ids >= 0 and
// unique (DUPLICATE_VOTER is keyed on the id), endpoint names unique per voter,
// and a supported kraft.version range with min <= max.
func NewVoterSet(voters []VoterNode) (VoterSet, error) {
	if len(voters) == 0 {
		return VoterSet{}, fmt.Errorf("%w: empty voter set", ErrInvalidControlRecord)
	}
	vs := VoterSet{Voters: slices.Clone(voters)}
	slices.SortFunc(vs.Voters, func(a, b VoterNode) int { return cmp.Compare(a.Key.ID, b.Key.ID) })
	for i, v := range vs.Voters {
		if v.Key.ID < 0 || (i > 0 && vs.Voters[i-1].Key.ID == v.Key.ID) {
			return VoterSet{}, fmt.Errorf("%w: voter id %d negative or repeated", ErrInvalidControlRecord, v.Key.ID)
		}
		if v.KRaftVersionMin < 0 || v.KRaftVersionMin > v.KRaftVersionMax {
			return VoterSet{}, fmt.Errorf("%w: voter %d supports kraft.version %d-%d", ErrInvalidControlRecord,
				v.Key.ID, v.KRaftVersionMin, v.KRaftVersionMax)
		}
		for j, e := range v.Endpoints {
			if slices.ContainsFunc(v.Endpoints[:j], func(o Endpoint) bool { return o.Name == e.Name }) {
				return VoterSet{}, fmt.Errorf("%w: voter %d lists listener %q twice", ErrInvalidControlRecord,
					v.Key.ID, e.Name)
			}
		}
	}
	return vs, nil
}

// IDs are the voter ids, ascending.
func (vs VoterSet) IDs() []int32 {
	ids := make([]int32, len(vs.Voters))
	for i, v := range vs.Voters {
		ids[i] = v.Key.ID
	}
	return ids
}

// Voter returns the voter with this id.
func (vs VoterSet) Voter(id int32) (VoterNode, bool) {
	i, ok := slices.BinarySearchFunc(vs.Voters, id, func(v VoterNode, id int32) int { return cmp.Compare(v.Key.ID, id) })
	if !ok {
		return VoterNode{}, false
	}
	return vs.Voters[i], true
}

// IsVoter reports whether key is a voter: the id is in the set and the directory
// id matches. A zero directory id on either side matches any (kraft.version 0
// voters have none; Kafka's ReplicaKey comparison for voters does the same).
func (vs VoterSet) IsVoter(key ReplicaKey) bool {
	v, ok := vs.Voter(key.ID)
	if !ok {
		return false
	}
	return v.Key.DirectoryID == [16]byte{} || key.DirectoryID == [16]byte{} || v.Key.DirectoryID == key.DirectoryID
}

// Equal reports whether two voter sets hold the same voters, endpoints and ranges.
func (vs VoterSet) Equal(o VoterSet) bool {
	return slices.EqualFunc(vs.Voters, o.Voters, func(a, b VoterNode) bool {
		return a.Key == b.Key && a.KRaftVersionMin == b.KRaftVersionMin && a.KRaftVersionMax == b.KRaftVersionMax &&
			slices.Equal(a.Endpoints, b.Endpoints)
	})
}

// String prints the voters as id:directory id, for logs and transcripts.
func (vs VoterSet) String() string {
	b := []byte{'['}
	for i, v := range vs.Voters {
		if i > 0 {
			b = append(b, ' ')
		}
		b = fmt.Appendf(b, "%d:%s", v.Key.ID, shortUUID(v.Key.DirectoryID))
	}
	return string(append(b, ']'))
}

// shortUUID prints a directory id's first four bytes in hex ("-" for zero), enough
// to tell replicas apart in a transcript.
func shortUUID(u [16]byte) string {
	if u == [16]byte{} {
		return "-"
	}
	return fmt.Sprintf("%x", u[:4])
}

// Smallest encodings in a VotersRecord: a voter (id, directory id, empty
// endpoints array, the feature struct and its tag byte, the voter's tag byte) and
// an endpoint (two empty strings, port, tag byte). They bound array counts before
// anything is allocated.
const (
	minVoterBytes    = 4 + 16 + 1 + 2 + 2 + 1 + 1
	minEndpointBytes = 1 + 1 + 2 + 1
)

// AppendVotersRecord appends the value of a VotersRecord (schema version 0,
// flexible) holding vs.
func AppendVotersRecord(b []byte, vs VoterSet) []byte {
	b = kbin.AppendInt16(b, 0)
	b = kbin.AppendCompactArrayLen(b, len(vs.Voters))
	for _, v := range vs.Voters {
		b = kbin.AppendInt32(b, v.Key.ID)
		b = kbin.AppendUuid(b, v.Key.DirectoryID)
		b = kbin.AppendCompactArrayLen(b, len(v.Endpoints))
		for _, e := range v.Endpoints {
			b = kbin.AppendCompactString(b, e.Name)
			b = kbin.AppendCompactString(b, e.Host)
			b = kbin.AppendUint16(b, e.Port)
			b = append(b, 0) // endpoint tags
		}
		b = kbin.AppendInt16(b, v.KRaftVersionMin)
		b = kbin.AppendInt16(b, v.KRaftVersionMax)
		b = append(b, 0, 0) // feature struct tags, voter tags
	}
	return append(b, 0)
}

// ParseVotersRecord decodes a VotersRecord value into a checked voter set
// (NewVoterSet). It reads the body at schema version 0 whatever its Version field
// says, as Kafka's ControlRecordUtils does, and skips unknown tagged fields.
func ParseVotersRecord(value []byte) (VoterSet, error) {
	r := kbin.Reader{Src: value}
	r.Int16() // Version
	n := r.CompactArrayLen()
	if n < 0 || int(n) > len(r.Src)/minVoterBytes {
		return VoterSet{}, fmt.Errorf("%w: VotersRecord with %d voters in %d bytes", ErrInvalidControlRecord, n, len(value))
	}
	voters := make([]VoterNode, 0, n)
	for range n {
		v, err := readVoter(&r)
		if err != nil {
			return VoterSet{}, err
		}
		voters = append(voters, v)
	}
	skipTags(&r)
	if err := complete(&r); err != nil {
		return VoterSet{}, fmt.Errorf("%w: VotersRecord: %w", ErrInvalidControlRecord, err)
	}
	return NewVoterSet(voters)
}

func readVoter(r *kbin.Reader) (VoterNode, error) {
	v := VoterNode{Key: ReplicaKey{ID: r.Int32(), DirectoryID: r.Uuid()}}
	n := r.CompactArrayLen()
	if n < 0 || int(n) > len(r.Src)/minEndpointBytes {
		return VoterNode{}, fmt.Errorf("%w: voter %d with %d endpoints", ErrInvalidControlRecord, v.Key.ID, n)
	}
	v.Endpoints = make([]Endpoint, 0, n)
	for range n {
		e := Endpoint{Name: r.CompactString(), Host: r.CompactString(), Port: r.Uint16()}
		skipTags(r)
		v.Endpoints = append(v.Endpoints, e)
	}
	v.KRaftVersionMin, v.KRaftVersionMax = r.Int16(), r.Int16()
	skipTags(r) // feature struct
	skipTags(r) // voter
	if !r.Ok() {
		return VoterNode{}, fmt.Errorf("%w: VotersRecord truncated in voter %d", ErrInvalidControlRecord, v.Key.ID)
	}
	return v, nil
}

// skipTags skips a tag section; a bad length leaves r failed.
func skipTags(r *kbin.Reader) {
	for n := r.Uvarint(); n > 0 && r.Ok(); n-- {
		r.Uvarint() // tag
		r.Span(int(r.Uvarint()))
	}
}

// complete reports a reader that ran out of bytes or has bytes left over.
func complete(r *kbin.Reader) error {
	if err := r.Complete(); err != nil {
		return err
	}
	if len(r.Src) > 0 {
		return fmt.Errorf("%d trailing bytes", len(r.Src))
	}
	return nil
}

// AppendKRaftVersionRecord appends the value of a KRaftVersionRecord (schema
// version 0, flexible).
func AppendKRaftVersionRecord(b []byte, kraftVersion int16) []byte {
	return append(kbin.AppendInt16(kbin.AppendInt16(b, 0), kraftVersion), 0)
}

// ParseKRaftVersionRecord decodes a KRaftVersionRecord value. A level this node
// does not support (above KRaftVersionMax, or negative) is an error, as Kafka's
// KRaftVersion.fromFeatureLevel makes it.
func ParseKRaftVersionRecord(value []byte) (int16, error) {
	r := kbin.Reader{Src: value}
	r.Int16() // Version
	level := r.Int16()
	skipTags(&r)
	if err := complete(&r); err != nil {
		return 0, fmt.Errorf("%w: KRaftVersionRecord: %w", ErrInvalidControlRecord, err)
	}
	if level < 0 || level > KRaftVersionMax {
		return 0, fmt.Errorf("%w: kraft.version %d (supported 0-%d)", ErrInvalidControlRecord, level, KRaftVersionMax)
	}
	return level, nil
}

// KRaftControlRecords are the control records that carry kraft.version and, at
// kraft.version >= 1, the voter set: what a snapshot's header batch holds after
// its SnapshotHeader, and what a leader appends when it writes the voter set.
// kraft.version 0 has none; an empty voter set is left out (Kafka's snapshot
// writer leaves it out when its history has none).
func KRaftControlRecords(kraftVersion int16, voters VoterSet) []raftlog.Record {
	if kraftVersion == KRaftVersionStatic {
		return nil
	}
	recs := []raftlog.Record{{Key: raftlog.ControlKey(raftlog.ControlKRaftVersion), Value: AppendKRaftVersionRecord(nil, kraftVersion)}}
	if len(voters.Voters) > 0 {
		recs = append(recs, raftlog.Record{Key: raftlog.ControlKey(raftlog.ControlKRaftVoters), Value: AppendVotersRecord(nil, voters)})
	}
	return recs
}

// BootstrapSnapshot encodes the snapshot `kraftd storage format --standalone` or
// `--initial-controllers` writes as raftlog.BootstrapSnapshotID, as Kafka's
// Formatter does: one header batch (SnapshotHeader, KRaftVersionRecord,
// VotersRecord) and the footer batch, at epoch 0, stamped nowMs.
func BootstrapSnapshot(kraftVersion int16, voters VoterSet, nowMs int64) ([]byte, error) {
	if kraftVersion < KRaftVersionDynamic || kraftVersion > KRaftVersionMax || len(voters.Voters) == 0 {
		return nil, fmt.Errorf("%w: a bootstrap snapshot at kraft.version %d with %d voters", ErrInvalidControlRecord,
			kraftVersion, len(voters.Voters))
	}
	var out []byte
	err := EncodeSnapshotKRaft(raftlog.BootstrapSnapshotID, nowMs, SnapshotKRaft{KRaftVersion: kraftVersion, Voters: voters},
		SnapshotRecords(nil), 1<<20, func(b raftlog.Batch) error {
			out = append(out, b.Raw...)
			return nil
		})
	return out, err
}
