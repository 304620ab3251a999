package records

import (
	"encoding/base64"
	"fmt"
)

// UUID is Kafka's Uuid: 16 bytes, written on the wire as two big-endian
// int64 halves (which is simply the 16 bytes in order).
type UUID [16]byte

// Well-known UUIDs from Kafka's Uuid class.
var (
	// ZeroUUID is Uuid.ZERO_UUID, used as "no id".
	ZeroUUID = UUID{}
	// OneUUID is Uuid.ONE_UUID, the topic id of __cluster_metadata.
	OneUUID = UUID{15: 1}
)

// uuidEncoding is the text form Kafka uses everywhere (tools, JSON, configs):
// URL-safe base64 without padding, always 22 characters.
var uuidEncoding = base64.RawURLEncoding

// String returns the 22-character URL-safe base64 form, as Uuid.toString.
func (u UUID) String() string { return uuidEncoding.EncodeToString(u[:]) }

// IsZero reports whether u is the zero UUID.
func (u UUID) IsZero() bool { return u == ZeroUUID }

// MarshalText lets encoding/json print UUIDs the way Kafka's JSON converters do.
func (u UUID) MarshalText() ([]byte, error) { return []byte(u.String()), nil }

// UnmarshalText parses the 22-character form; see ParseUUID.
func (u *UUID) UnmarshalText(b []byte) error {
	p, err := ParseUUID(string(b))
	if err != nil {
		return err
	}
	*u = p
	return nil
}

// ParseUUID parses Kafka's text form (Uuid.fromString). Kafka accepts only
// strings that decode to exactly 16 bytes; so do we.
func ParseUUID(s string) (UUID, error) {
	var u UUID
	if len(s) != 22 {
		return u, fmt.Errorf("records: uuid %q: want 22 base64 characters, have %d", s, len(s))
	}
	// Strict rejects non-zero padding bits, so every UUID has one text form.
	n, err := uuidEncoding.Strict().Decode(u[:], []byte(s))
	if err != nil || n != len(u) {
		return UUID{}, fmt.Errorf("records: uuid %q: invalid base64: %v", s, err)
	}
	return u, nil
}
