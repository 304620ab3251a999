package main

import (
	"strings"
	"testing"
)

// TestParseFeatureOp: the flags of kraftd features map to UpdateFeatures updates as
// kafka-features.sh maps them: --release-version is metadata.version of that release
// (a downgrade also sends the release's other features at 0) and excludes the other
// flags; --unsafe makes a downgrade unsafe; disable sets level 0; a feature named
// twice, a level that is not a short and an unknown version are refused.
func TestParseFeatureOp(t *testing.T) {
	got := func(op featureOp) string {
		var parts []string
		for _, u := range op.updates {
			parts = append(parts, u.Feature+"="+itoa16(u.MaxVersionLevel)+"/"+itoa16(int16(u.UpgradeType)))
		}
		return strings.Join(parts, " ")
	}
	for _, c := range []struct {
		op, metadata, release string
		features              []string
		unsafe                bool
		want                  string
	}{
		{"upgrade", "3.7-IV1", "", nil, false, "metadata.version=16/1"},
		{"upgrade", "", "3.6", nil, false, "metadata.version=14/1"},
		{"downgrade", "", "3.6", nil, false, "metadata.version=14/2 group.version=0/2 transaction.version=0/2"},
		{"downgrade", "3.7-IV0", "", []string{"kraft.version=1"}, true, "metadata.version=15/3 kraft.version=1/3"},
		{"disable", "", "", []string{"group.version"}, false, "group.version=0/2"},
	} {
		op, err := parseFeatureOp(c.op, c.metadata, c.release, c.features, c.unsafe, false)
		if err != nil || got(op) != c.want {
			t.Errorf("%s %q %q %v: %q, %v; want %q", c.op, c.metadata, c.release, c.features, got(op), err, c.want)
		}
	}
	for _, c := range []struct {
		op, metadata, release string
		features              []string
		want                  string
	}{
		{"upgrade", "3.7", "3.7", nil, "can not specify --release-version with other feature flags"},
		{"upgrade", "", "", []string{"a=1", "a=2"}, "feature a was specified more than once"},
		{"upgrade", "", "", []string{"a"}, "equals sign not found"},
		{"upgrade", "", "", []string{"a=x"}, "unable to parse x as a short"},
		{"upgrade", "4.0", "", nil, "unknown metadata.version 4.0"},
		{"upgrade", "", "", nil, "you must specify at least one feature to upgrade"},
	} {
		if _, err := parseFeatureOp(c.op, c.metadata, c.release, c.features, false, false); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %q %q %v: %v, want %q", c.op, c.metadata, c.release, c.features, err, c.want)
		}
	}
}

func itoa16(v int16) string { return itoa(int(v)) }
