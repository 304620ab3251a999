package image

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/kraftd/kraftd/metadata/records"
)

// Config resource types (Kafka's ConfigResource.Type ids).
const (
	ConfigTopic         int8 = 2
	ConfigBroker        int8 = 4
	ConfigBrokerLogger  int8 = 8
	ConfigClientMetrics int8 = 16
	ConfigGroup         int8 = 32
)

// ConfigResource names what a dynamic configuration applies to. Name is the
// topic name or broker id; "" with ConfigBroker is the cluster default.
type ConfigResource struct {
	Type int8
	Name string
}

func compareResource(a, b ConfigResource) int {
	return cmp.Or(cmp.Compare(a.Type, b.Type), cmp.Compare(a.Name, b.Name))
}

// String prints the resource as TYPE/name, e.g. TOPIC/foo.
func (r ConfigResource) String() string {
	var t string
	switch r.Type {
	case ConfigTopic:
		t = "TOPIC"
	case ConfigBroker:
		t = "BROKER"
	case ConfigBrokerLogger:
		t = "BROKER_LOGGER"
	case ConfigClientMetrics:
		t = "CLIENT_METRICS"
	case ConfigGroup:
		t = "GROUP"
	default:
		t = "TYPE" + strconv.Itoa(int(r.Type))
	}
	return t + "/" + r.Name
}

// ConfigEntry is one dynamic configuration key and value.
type ConfigEntry struct {
	Name, Value string
}

// configSet is the configuration of one resource, sorted by name and never
// written once it belongs to an image.
type configSet []ConfigEntry

func (s configSet) get(name string) (string, bool) {
	i, ok := slices.BinarySearchFunc(s, name, func(e ConfigEntry, n string) int { return cmp.Compare(e.Name, n) })
	if !ok {
		return "", false
	}
	return s[i].Value, true
}

func newConfigSet(m map[string]string) configSet {
	out := make(configSet, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, ConfigEntry{Name: k, Value: m[k]})
	}
	return out
}

// configWorking returns the Delta's mutable copy of res's configuration,
// creating it from the base image on first use.
func (d *Delta) configWorking(res ConfigResource) map[string]string {
	if m, ok := d.configs[res]; ok {
		return m
	}
	m := map[string]string{}
	if base, ok := d.base.configs.Get(res); ok {
		for _, e := range base {
			m[e.Name] = e.Value
		}
	}
	put(&d.configs, res, m)
	return m
}

// replayConfig sets or (nil Value) deletes one key. A resource left with no
// keys disappears from the image, as in Kafka's ConfigurationsImage.
func (d *Delta) replayConfig(r *records.ConfigRecord) error {
	if r.Name == "" {
		return fmt.Errorf("%w: config record without a key name", ErrInvalidRecord)
	}
	m := d.configWorking(ConfigResource{Type: r.ResourceType, Name: r.ResourceName})
	if r.Value == nil {
		delete(m, r.Name)
	} else {
		m[r.Name] = *r.Value
	}
	return nil
}

// removeConfigs drops every key of res (a deleted topic's configs).
func (d *Delta) removeConfigs(res ConfigResource) {
	if _, ok := d.base.configs.Get(res); !ok {
		if _, ok := d.configs[res]; !ok {
			return
		}
	}
	put(&d.configs, res, map[string]string{})
}

func (d *Delta) applyConfigs() ptree[ConfigResource, configSet] {
	t := d.base.configs
	if len(d.configs) == 0 {
		return t // sorting even no keys allocates an iterator and a slice
	}
	for _, res := range slices.SortedFunc(maps.Keys(d.configs), compareResource) {
		if m := d.configs[res]; len(m) == 0 {
			t = t.Delete(res)
		} else {
			t = t.Set(res, newConfigSet(m))
		}
	}
	return t
}

func configRecords(t ptree[ConfigResource, configSet]) []records.Record {
	var out []records.Record
	for res, set := range t.All() {
		for _, e := range set {
			v := e.Value
			out = append(out, records.Record{Message: &records.ConfigRecord{
				ResourceType: res.Type, ResourceName: res.Name, Name: e.Name, Value: &v}})
		}
	}
	return out
}
