package app

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestRandomUUIDShape(t *testing.T) {
	for range 200 {
		u, err := RandomUUID(nil)
		if err != nil {
			t.Fatal(err)
		}
		s := u.String()
		if len(s) != 22 || strings.HasPrefix(s, "-") || strings.ContainsAny(s, "+/=") {
			t.Fatalf("bad uuid text %q", s)
		}
		if u[6]>>4 != 4 || u[8]>>6 != 2 {
			t.Fatalf("uuid %x is not version 4 / IETF variant", u[:])
		}
		back, err := ParseUUID(s)
		if err != nil || back != u {
			t.Fatalf("ParseUUID(%q) = %v, %v", s, back, err)
		}
	}
}

// A source whose first draw encodes with a leading '-' (0xf8 -> '-' in the
// URL alphabet) must be skipped, as Kafka's Uuid.randomUuid does.
func TestRandomUUIDSkipsLeadingDash(t *testing.T) {
	first := bytes.Repeat([]byte{0xf8}, 16)
	second := bytes.Repeat([]byte{0x11}, 16)
	u, err := RandomUUID(bytes.NewReader(append(first, second...)))
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(u.String(), "-") || u[0] != 0x11 {
		t.Fatalf("got %s (%x), want the second draw", u, u[:])
	}
}

func TestParseUUID(t *testing.T) {
	good := []string{"MkU3OEVBNTcwNTJENDM2Qg", "MkU3OEVBNTcwNTJENDM2Qg==", "AAAAAAAAAAAAAAAAAAAAAA"}
	for _, s := range good {
		if _, err := ParseUUID(s); err != nil {
			t.Errorf("ParseUUID(%q): %v", s, err)
		}
	}
	bad := []string{"", "abc", "MkU3OEVBNTcwNTJENDM2Qg+", "MkU3OEVBNTcwNTJENDM2QgMkU3OEVBNTcwNTJENDM2Qg", "MkU3OEVBNTcwNTJENDM2"}
	for _, s := range bad {
		if _, err := ParseUUID(s); !errors.Is(err, ErrBadUUID) {
			t.Errorf("ParseUUID(%q) err = %v, want ErrBadUUID", s, err)
		}
	}
	if !ZeroUUID.IsReserved() || !OneUUID.IsReserved() || OneUUID.String() != "AAAAAAAAAAAAAAAAAAAAAQ" {
		t.Errorf("reserved uuids wrong: %s %s", ZeroUUID, OneUUID)
	}
}
