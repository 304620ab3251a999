package app

import (
	"slices"
	"testing"

	"github.com/kraftd/kraftd/broker"
)

// Only the log.* settings server.properties sets become a topic's
// STATIC_BROKER_CONFIG values; retention and roll are given in ms whichever
// synonym was set.
func TestStaticTopicConfigs(t *testing.T) {
	c := DefaultConfig()
	for k, v := range map[string]string{"log.retention.hours": "24", "compression.type": "zstd", "log.roll.ms": "1000"} {
		if err := c.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	want := []broker.StaticConfig{{Name: "compression.type", Value: "zstd"}, {Name: "log.retention.ms", Value: "86400000"}, {Name: "log.roll.ms", Value: "1000"}}
	if got := staticTopicConfigs(&c); !slices.Equal(got, want) {
		t.Fatalf("%v, want %v", got, want)
	}
	d := DefaultConfig()
	if got := staticTopicConfigs(&d); len(got) != 0 {
		t.Fatalf("defaults listed as static: %v", got)
	}
}
