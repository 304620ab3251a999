package raftlog

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// QuorumStateFile is the quorum-state file's name inside the partition directory
// (Kafka's FileQuorumStateStore.DEFAULT_FILE_NAME).
const QuorumStateFile = "quorum-state"

// Quorum-state decoding errors.
var (
	// ErrCorruptQuorumState means the file is not a readable quorum-state: Kafka
	// treats this as "no state" and starts Unattached at the log's last epoch.
	ErrCorruptQuorumState = errors.New("raftlog: corrupt quorum-state")
	// ErrUnsupportedQuorumState means a data_version this code does not know (a newer
	// Kafka wrote it). Like Kafka, we refuse to start rather than forget a vote.
	ErrUnsupportedQuorumState = errors.New("raftlog: unsupported quorum-state data_version")
)

// EncodeQuorumState renders st exactly as Kafka's FileQuorumStateStore writes it:
// the QuorumStateData JSON converter's output for st.DataVersion (fields in schema
// order, compact, no trailing newline) with "data_version" appended last.
//
//	v0: {"clusterId":"","leaderId":1,"leaderEpoch":2,"votedId":-1,"appliedOffset":0,"currentVoters":[{"voterId":1}],"data_version":0}
//	v1: {"leaderId":-1,"leaderEpoch":2,"votedId":1,"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}
//
// A nil CurrentVoters is written as [] in v0, as Kafka never writes null there.
func EncodeQuorumState(st QuorumState) ([]byte, error) {
	if st.DataVersion != 0 && st.DataVersion != 1 {
		return nil, fmt.Errorf("%w: %d", ErrUnsupportedQuorumState, st.DataVersion)
	}
	var b bytes.Buffer
	b.WriteByte('{')
	if st.DataVersion == 0 {
		b.WriteString(`"clusterId":"",`)
	}
	writeIntField(&b, "leaderId", int64(st.LeaderID))
	writeIntField(&b, "leaderEpoch", int64(st.LeaderEpoch))
	writeIntField(&b, "votedId", int64(st.VotedID))
	if st.DataVersion == 0 {
		writeIntField(&b, "appliedOffset", 0)
		b.WriteString(`"currentVoters":[`)
		for i, id := range st.CurrentVoters {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`{"voterId":`)
			b.WriteString(strconv.FormatInt(int64(id), 10))
			b.WriteByte('}')
		}
		b.WriteString("],")
	} else {
		b.WriteString(`"votedDirectoryId":"`)
		b.WriteString(base64.RawURLEncoding.EncodeToString(st.VotedDirectoryID[:]))
		b.WriteString(`",`)
	}
	b.WriteString(`"data_version":`)
	b.WriteString(strconv.Itoa(int(st.DataVersion)))
	b.WriteByte('}')
	return b.Bytes(), nil
}

func writeIntField(b *bytes.Buffer, name string, v int64) {
	b.WriteByte('"')
	b.WriteString(name)
	b.WriteString(`":`)
	b.WriteString(strconv.FormatInt(v, 10))
	b.WriteByte(',')
}

// quorumStateJSON is the union of both data versions. Pointers tell "absent" from
// zero, because Kafka's generated converter rejects a missing mandatory field.
type quorumStateJSON struct {
	DataVersion      *int64          `json:"data_version"`
	LeaderID         *int64          `json:"leaderId"`
	LeaderEpoch      *int64          `json:"leaderEpoch"`
	VotedID          *int64          `json:"votedId"`
	VotedDirectoryID *string         `json:"votedDirectoryId"`
	CurrentVoters    []quorumVoterJS `json:"currentVoters"`
}

type quorumVoterJS struct {
	VoterID *int64 `json:"voterId"`
}

// DecodeQuorumState parses a quorum-state file. Like Kafka it reads only the first
// line. Unknown keys are ignored; leaderId, leaderEpoch, votedId and data_version
// are mandatory. It returns ErrCorruptQuorumState for anything unreadable and
// ErrUnsupportedQuorumState for a data_version other than 0 or 1.
func DecodeQuorumState(data []byte) (QuorumState, error) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		data = data[:i]
	}
	var js quorumStateJSON
	if err := json.Unmarshal(data, &js); err != nil {
		return QuorumState{}, fmt.Errorf("%w: %v", ErrCorruptQuorumState, err)
	}
	if js.DataVersion == nil {
		return QuorumState{}, fmt.Errorf("%w: no data_version", ErrCorruptQuorumState)
	}
	if v := *js.DataVersion; v != 0 && v != 1 {
		return QuorumState{}, fmt.Errorf("%w: %d", ErrUnsupportedQuorumState, v)
	}
	st := QuorumState{DataVersion: int16(*js.DataVersion)}
	var err error
	if st.LeaderID, err = int32Field("leaderId", js.LeaderID); err != nil {
		return QuorumState{}, err
	}
	if st.LeaderEpoch, err = int32Field("leaderEpoch", js.LeaderEpoch); err != nil {
		return QuorumState{}, err
	}
	if st.VotedID, err = int32Field("votedId", js.VotedID); err != nil {
		return QuorumState{}, err
	}
	if st.DataVersion == 1 {
		return st, decodeDirectoryID(&st, js.VotedDirectoryID)
	}
	return st, decodeVoters(&st, js.CurrentVoters)
}

func int32Field(name string, v *int64) (int32, error) {
	if v == nil {
		return 0, fmt.Errorf("%w: missing %s", ErrCorruptQuorumState, name)
	}
	if *v < -1<<31 || *v > 1<<31-1 {
		return 0, fmt.Errorf("%w: %s %d out of int32 range", ErrCorruptQuorumState, name, *v)
	}
	return int32(*v), nil
}

func decodeDirectoryID(st *QuorumState, s *string) error {
	if s == nil {
		return nil // absent: no directory id, the zero UUID
	}
	raw, err := base64.RawURLEncoding.DecodeString(*s)
	if err != nil || len(raw) != len(st.VotedDirectoryID) {
		return fmt.Errorf("%w: votedDirectoryId %q", ErrCorruptQuorumState, *s)
	}
	copy(st.VotedDirectoryID[:], raw)
	return nil
}

func decodeVoters(st *QuorumState, voters []quorumVoterJS) error {
	st.CurrentVoters = make([]int32, 0, len(voters))
	for _, v := range voters {
		id, err := int32Field("voterId", v.VoterID)
		if err != nil {
			return err
		}
		st.CurrentVoters = append(st.CurrentVoters, id)
	}
	return nil
}
