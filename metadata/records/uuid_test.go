package records

import (
	"encoding/json"
	"testing"
)

func TestUUIDText(t *testing.T) {
	if got := OneUUID.String(); got != "AAAAAAAAAAAAAAAAAAAAAQ" {
		t.Fatalf("OneUUID = %s", got)
	}
	if got := ZeroUUID.String(); got != "AAAAAAAAAAAAAAAAAAAAAA" {
		t.Fatalf("ZeroUUID = %s", got)
	}
	u := UUID{0xff, 0xfe, 0xfd, 15: 0x80}
	s := u.String()
	if len(s) != 22 || s[0] != '_' { // URL-safe alphabet: 0xff.. starts with '_'
		t.Fatalf("String() = %q", s)
	}
	back, err := ParseUUID(s)
	if err != nil || back != u {
		t.Fatalf("ParseUUID(%q) = %v, %v", s, back, err)
	}
	for _, bad := range []string{"", "AAAA", "AAAAAAAAAAAAAAAAAAAAAQ==", "AAAAAAAAAAAAAAAAAAAA+Q",
		"AAAAAAAAAAAAAAAAAAAAAB", "AAAAAAAAAAAAAAAAAAAAAAA"} {
		if _, err := ParseUUID(bad); err == nil {
			t.Errorf("ParseUUID(%q) succeeded", bad)
		}
	}
	var viaJSON struct{ ID UUID }
	if err := json.Unmarshal([]byte(`{"ID":"AAAAAAAAAAAAAAAAAAAAAQ"}`), &viaJSON); err != nil || viaJSON.ID != OneUUID {
		t.Fatalf("json: %v %v", viaJSON.ID, err)
	}
}

func TestTypeString(t *testing.T) {
	names := map[Type]string{
		TypeRegisterBroker: "REGISTER_BROKER_RECORD", TypeBrokerRegistrationChange: "BROKER_REGISTRATION_CHANGE_RECORD",
		TypeNoOp: "NO_OP_RECORD", TypeProducerIds: "PRODUCER_IDS_RECORD", Type(6): "UNKNOWN_RECORD(6)",
	}
	for typ, want := range names {
		if typ.String() != want {
			t.Errorf("%d: %s, want %s", typ, typ, want)
		}
	}
	for _, typ := range Types() {
		m, err := New(typ)
		if err != nil || m.Type() != typ {
			t.Errorf("New(%s) = %v, %v", typ, m, err)
		}
	}
	if _, err := New(Type(6)); err == nil {
		t.Error("New(6) succeeded")
	}
}
