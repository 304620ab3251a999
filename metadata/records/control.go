package records

import (
	"encoding/binary"
	"fmt"
	"strconv"
)

// ControlType is the type in a control record's key (ControlRecordType).
type ControlType int16

// Control record types. kmsg's ControlRecordKeyTypeLeaderChange is 3 and
// wrong for this purpose: Kafka's LEADER_CHANGE is 2.
const (
	ControlAbort          ControlType = 0
	ControlCommit         ControlType = 1
	ControlLeaderChange   ControlType = 2
	ControlSnapshotHeader ControlType = 3
	ControlSnapshotFooter ControlType = 4
	ControlKRaftVersion   ControlType = 5
	ControlKRaftVoters    ControlType = 6
)

var controlNames = [...]string{
	"ABORT", "COMMIT", "LEADER_CHANGE", "SNAPSHOT_HEADER", "SNAPSHOT_FOOTER",
	"KRAFT_VERSION", "KRAFT_VOTERS",
}

// String returns Kafka's ControlRecordType name, or "UNKNOWN(n)".
func (t ControlType) String() string {
	if t >= 0 && int(t) < len(controlNames) {
		return controlNames[t]
	}
	return "UNKNOWN(" + strconv.Itoa(int(t)) + ")"
}

// controlKeySize is the v0 control key: int16 version + int16 type.
const controlKeySize = 4

// EncodeControlKey returns the 4-byte version-0 control record key for t.
func EncodeControlKey(t ControlType) []byte {
	b := make([]byte, 0, controlKeySize)
	b = appendInt16(b, 0)
	return appendInt16(b, int16(t))
}

// DecodeControlKey returns the type in a control record key. As in Kafka's
// ControlRecordType.parseTypeId, a key shorter than 4 bytes or with a
// negative version is an error; a newer version is read as version 0 (newer
// versions may only append fields), so extra bytes are ignored. An unknown
// type is returned as is, without error: Kafka treats it as UNKNOWN and
// skips the record, and the caller decides the same.
func DecodeControlKey(b []byte) (ControlType, error) {
	if len(b) < controlKeySize {
		return 0, fmt.Errorf("%w: control key of %d bytes, need %d", ErrTruncated, len(b), controlKeySize)
	}
	if v := int16(binary.BigEndian.Uint16(b)); v < 0 {
		return 0, fmt.Errorf("%w: control key version %d", ErrMalformed, v)
	}
	return ControlType(binary.BigEndian.Uint16(b[2:])), nil
}

// ControlValue is the value of a KRaft control record. Unlike metadata
// records there is no frame: the value is the flexible body, whose first
// field is the message's own Version.
type ControlValue interface {
	ControlType() ControlType
	AppendTo(dst []byte) []byte
	ReadFrom(b []byte) error
}

// DecodeControlValue decodes the value of a control record of type t.
// ABORT and COMMIT (transaction markers) never appear in the metadata log and
// are reported as ErrUnknownType, like any other type.
func DecodeControlValue(t ControlType, b []byte) (ControlValue, error) {
	var v ControlValue
	switch t {
	case ControlLeaderChange:
		v = new(LeaderChangeMessage)
	case ControlSnapshotHeader:
		v = new(SnapshotHeaderRecord)
	case ControlSnapshotFooter:
		v = new(SnapshotFooterRecord)
	case ControlKRaftVersion:
		v = new(KRaftVersionRecord)
	case ControlKRaftVoters:
		v = new(VotersRecord)
	default:
		return nil, fmt.Errorf("%w: control type %s", ErrUnknownType, t)
	}
	if err := v.ReadFrom(b); err != nil {
		return nil, fmt.Errorf("%w (decoding %s)", err, t)
	}
	return v, nil
}
