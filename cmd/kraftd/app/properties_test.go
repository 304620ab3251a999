package app

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParsePropertiesSyntax(t *testing.T) {
	in := strings.Join([]string{
		"# a comment",
		"! another comment",
		"",
		"   node.id=3",
		"process.roles: broker,controller",
		"listeners PLAINTEXT://127.0.0.1:9092",
		"log.dirs = /a,\\",
		"    /b,\\",
		"  /c",
		`key\ with\ spaces=v`,
		`escaped\=key=x\ty\u0041`,
		"empty=",
		"node.id=4",
		`trailing=even\\`,
		"last=1",
	}, "\n")
	props, err := ParseProperties(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Property{
		{"node.id", "3", 4},
		{"process.roles", "broker,controller", 5},
		{"listeners", "PLAINTEXT://127.0.0.1:9092", 6},
		{"log.dirs", "/a,/b,/c", 7},
		{"key with spaces", "v", 10},
		{"escaped=key", "x\tyA", 11},
		{"empty", "", 12},
		{"node.id", "4", 13},
		{"trailing", `even\`, 14},
		{"last", "1", 15},
	}
	if len(props) != len(want) {
		t.Fatalf("got %d properties %+v, want %d", len(props), props, len(want))
	}
	for i := range want {
		if props[i] != want[i] {
			t.Errorf("property %d = %+v, want %+v", i, props[i], want[i])
		}
	}
}

func TestParsePropertiesContinuationAtEOFAndCRLF(t *testing.T) {
	props, err := ParseProperties(strings.NewReader("a=1\r\nb=2\\\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(props) != 2 || props[0].Value != "1" || props[1].Value != "2" {
		t.Fatalf("got %+v", props)
	}
}

func TestParsePropertiesBadUnicodeEscape(t *testing.T) {
	_, err := ParseProperties(strings.NewReader(`a=\u12`))
	if !errors.Is(err, ErrPropertiesSyntax) || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("err = %v, want ErrPropertiesSyntax on line 1", err)
	}
}

func TestStorePropertiesRoundTrip(t *testing.T) {
	now := time.Date(2024, 2, 5, 13, 49, 2, 0, time.UTC)
	in := map[string]string{"b": "x=y: #!", "a": " lead", "k k": "tab\tnl\n"}
	out := StoreProperties(in, now)
	wantHead := "#\n#Mon Feb 05 13:49:02 UTC 2024\na=\\ lead\nb=x\\=y\\: \\#\\!\nk\\ k=tab\\tnl\\n\n"
	if string(out) != wantHead {
		t.Fatalf("got\n%q\nwant\n%q", out, wantHead)
	}
	props, err := ParseProperties(strings.NewReader(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range props {
		if in[p.Key] != p.Value {
			t.Errorf("%q round-tripped to %q, want %q", p.Key, p.Value, in[p.Key])
		}
	}
	if len(props) != len(in) {
		t.Errorf("got %d props, want %d", len(props), len(in))
	}
}
