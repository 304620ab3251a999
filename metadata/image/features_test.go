package image

import (
	"errors"
	"testing"
)

// TestMetadataVersionNames: names parse as Kafka's MetadataVersion.fromVersionString
// (a release alone is its latest internal version), print back, and downgrades are
// safe only when no level in between changed the record formats.
func TestMetadataVersionNames(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int16
	}{{"3.6-IV2", 14}, {"3.6", 14}, {"3.7", 19}, {"3.7-IV1", 16}, {"3.3-IV0", 4}, {"3.9", 21}, {"16", 16}} {
		got, err := ParseMetadataVersion(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseMetadataVersion(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"4.0", "3.6-IV9", "", "x"} {
		if _, err := ParseMetadataVersion(bad); !errors.Is(err, ErrUnknownMetadataVersion) {
			t.Errorf("ParseMetadataVersion(%q): %v", bad, err)
		}
	}
	if MetadataVersionName(14) != "3.6-IV2" || MetadataVersionName(99) != "99" {
		t.Errorf("names: %s %s", MetadataVersionName(14), MetadataVersionName(99))
	}
	for _, c := range []struct {
		lo, hi  int16
		changed bool
	}{{15, 16, false}, {14, 16, true}, {9, 10, false}, {20, 21, false}, {18, 21, false}, {16, 17, true}, {21, 22, true}} {
		if got := MetadataChangedBetween(c.lo, c.hi); got != c.changed {
			t.Errorf("MetadataChangedBetween(%d, %d) = %t", c.lo, c.hi, got)
		}
	}
}
