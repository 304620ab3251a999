package image

import "testing"

// Kafka's ConfigException messages for each kind of check the schema makes.
func TestValidateTopicConfig(t *testing.T) {
	for _, tc := range []struct{ name, value, want string }{
		{"retention.ms", " -1 ", ""},
		{"retention.ms", "-2", "Invalid value -2 for configuration retention.ms: Value must be at least -1"},
		{"segment.bytes", "2147483648", "Invalid value 2147483648 for configuration segment.bytes: Not a number of type INT"},
		{"min.cleanable.dirty.ratio", "0.25", ""},
		{"min.cleanable.dirty.ratio", "x", "Invalid value x for configuration min.cleanable.dirty.ratio: Not a number of type DOUBLE"},
		{"cleanup.policy", "compact, delete", ""},
		{"cleanup.policy", "", ""},
		{"message.timestamp.type", "logappendtime", "Invalid value logappendtime for configuration message.timestamp.type: String must be one of: CreateTime, LogAppendTime"},
		{"unclean.leader.election.enable", "False", ""},
		{"compression.zstd.level", "23", "Invalid value 23 for configuration compression.zstd.level: Value must be no more than 22"},
		{"compression.gzip.level", "-1", ""},
		{"compression.gzip.level", "0", "Invalid value 0 for configuration compression.gzip.level: Value must be between 1 and 9, or -1"},
		{"leader.replication.throttled.replicas", "*", ""},
		{"leader.replication.throttled.replicas", "0:1,1:2", ""},
		{"leader.replication.throttled.replicas", "0-1", "Invalid value 0-1 for configuration leader.replication.throttled.replicas: must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."},
		{"no.such.config", "1", "Unknown topic config name: no.such.config"},
	} {
		if got := ValidateTopicConfig(tc.name, tc.value); got != tc.want {
			t.Errorf("%s=%q: %q, want %q", tc.name, tc.value, got, tc.want)
		}
	}
	if !IsListTopicConfig("cleanup.policy") || IsListTopicConfig("retention.ms") || !IsTopicConfig("preallocate") {
		t.Error("schema lookups")
	}
}

// Every topic config has a default that passes its own check, and the
// defaults list exactly the schema's keys.
func TestTopicConfigDefaults(t *testing.T) {
	ds := TopicConfigDefaults()
	if len(ds) != len(topicConfigDefs) {
		t.Fatalf("%d defaults for %d topic configs", len(ds), len(topicConfigDefs))
	}
	for i, d := range ds {
		if why := ValidateTopicConfig(d.Name, d.Value); why != "" {
			t.Errorf("default of %s: %s", d.Name, why)
		}
		if d.Type == "" || i > 0 && ds[i-1].Name >= d.Name {
			t.Errorf("%s: type %q, out of order", d.Name, d.Type)
		}
	}
}
