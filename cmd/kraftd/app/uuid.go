package app

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"strings"
)

// UUID is Kafka's 128-bit Uuid. Its text form is URL-safe base64 without
// padding (22 characters), which is what cluster.id and directory.id hold.
type UUID [16]byte

// Reserved UUIDs that Kafka's Uuid.randomUuid never returns: the zero UUID
// means "none", and ONE is the topic id of __cluster_metadata.
var (
	ZeroUUID = UUID{}
	OneUUID  = UUID{15: 1}
)

// String returns the 22-character URL-safe base64 form.
func (u UUID) String() string {
	return base64.RawURLEncoding.EncodeToString(u[:])
}

// IsReserved reports whether u is one of the UUIDs Kafka never generates.
func (u UUID) IsReserved() bool { return u == ZeroUUID || u == OneUUID }

// RandomUUID returns a version-4 UUID drawn from src (crypto/rand when nil),
// skipping the reserved ones and any whose text starts with '-', exactly as
// Kafka's Uuid.randomUuid does: a leading dash would read as a command-line
// option when the id is pasted into a shell.
func RandomUUID(src io.Reader) (UUID, error) {
	if src == nil {
		src = rand.Reader
	}
	for {
		var u UUID
		if _, err := io.ReadFull(src, u[:]); err != nil {
			return UUID{}, fmt.Errorf("app: generating uuid: %w", err)
		}
		u[6] = u[6]&0x0f | 0x40 // version 4
		u[8] = u[8]&0x3f | 0x80 // IETF variant
		if !u.IsReserved() && !strings.HasPrefix(u.String(), "-") {
			return u, nil
		}
	}
}

// ParseUUID decodes the base64 text form. Like Kafka's Uuid.fromString it
// accepts URL-safe base64 with or without padding and insists on 16 bytes.
func ParseUUID(s string) (UUID, error) {
	if len(s) > 24 {
		return UUID{}, fmt.Errorf("%w: %q is too long to be a base64 UUID", ErrBadUUID, s)
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		return UUID{}, fmt.Errorf("%w: %q is not URL-safe base64", ErrBadUUID, s)
	}
	if len(raw) != 16 {
		return UUID{}, fmt.Errorf("%w: %q decodes to %d bytes, not 16", ErrBadUUID, s, len(raw))
	}
	return UUID(raw), nil
}
