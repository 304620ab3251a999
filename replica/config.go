package replica

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/kraftd/kraftd/storage"
)

// Defaults of the topic-level settings kraftd applies (Kafka's LogConfig and
// ServerLogConfigs defaults).
const (
	// DefaultMaxMessageBytes is message.max.bytes' default (1 MiB + 12 bytes).
	DefaultMaxMessageBytes = 1048588
	// DefaultRetentionMs is log.retention.hours' default, 168 hours.
	DefaultRetentionMs = 7 * 24 * 60 * 60 * 1000
	// DefaultRetentionCheckIntervalMs is log.retention.check.interval.ms'
	// default, 5 minutes.
	DefaultRetentionCheckIntervalMs = 300000
	// DefaultDeleteRetentionMs is log.cleaner.delete.retention.ms' default,
	// one day.
	DefaultDeleteRetentionMs = 24 * 60 * 60 * 1000
	// DefaultProducerIDExpirationMs is producer.id.expiration.ms' default,
	// one day.
	DefaultProducerIDExpirationMs = 86400000
	// DefaultProducerIDExpirationCheckIntervalMs is
	// producer.id.expiration.check.interval.ms' default, 10 minutes.
	DefaultProducerIDExpirationCheckIntervalMs = 600000
)

// Codec names of compression.type. "producer" keeps each batch as sent;
// "uncompressed" and the codecs make the leader recompress a batch of
// another codec, as Kafka's LogValidator does.
const (
	CompressionProducer     = "producer"
	CompressionUncompressed = "uncompressed"
)

var compressionCodecs = map[string]int8{
	CompressionUncompressed: storage.CompressionNone,
	"gzip":                  storage.CompressionGzip,
	"snappy":                storage.CompressionSnappy,
	"lz4":                   storage.CompressionLz4,
	"zstd":                  storage.CompressionZstd,
}

// TopicConfig is the effective log configuration of one topic's partitions:
// the topic's own settings (ConfigRecord in KRaft), else the broker's dynamic
// defaults, else its static ones (server.properties). Updates apply to the
// open logs (Manager.SetTopicConfig).
type TopicConfig struct {
	// SegmentBytes is segment.bytes (log.segment.bytes): a segment rolls
	// before it would grow past it; a produce larger than it is
	// RECORD_LIST_TOO_LARGE.
	SegmentBytes int64
	// SegmentMs is segment.ms (log.roll.ms, log.roll.hours): a segment rolls
	// when a batch's timestamp is that far past its first batch's.
	SegmentMs int64
	// RetentionMs is retention.ms (log.retention.ms/minutes/hours): segments
	// whose newest timestamp is older are deleted; -1 keeps them forever.
	RetentionMs int64
	// RetentionBytes is retention.bytes (log.retention.bytes): whole
	// segments are deleted, oldest first, while the log stays above it; -1
	// means no bound.
	RetentionBytes int64
	// MaxMessageBytes is max.message.bytes (message.max.bytes): the largest
	// batch a producer may append (after recompression).
	MaxMessageBytes int
	// CompressionType is compression.type: CompressionProducer keeps batches
	// as sent; otherwise "uncompressed", "gzip", "snappy", "lz4" or "zstd",
	// to which a batch of another codec is recompressed.
	CompressionType string
	// MinInsyncReplicas is min.insync.replicas: acks=-1 produces need this
	// many in-sync replicas, and the leader's high watermark does not move
	// while the ISR is smaller (Kafka 3.7+, KAFKA-15583); both count at most
	// the partition's replicas. Zero or less: 1.
	MinInsyncReplicas int
	// Delete and Compact are cleanup.policy's two values. Retention applies
	// only with Delete. Compact makes appends refuse records without a key
	// (INVALID_RECORD), and the background pass compacts the closed
	// segments below the high watermark (storage.Log.Compact).
	Delete, Compact bool
	// DeleteRetentionMs is delete.retention.ms
	// (log.cleaner.delete.retention.ms, one day): how long compaction keeps
	// a tombstone.
	DeleteRetentionMs int64
}

// DefaultTopicConfig returns Kafka's defaults.
func DefaultTopicConfig() TopicConfig {
	return TopicConfig{
		SegmentBytes: storage.DefaultLogSegmentBytes, SegmentMs: storage.DefaultLogSegmentMs,
		RetentionMs: DefaultRetentionMs, RetentionBytes: -1, MaxMessageBytes: DefaultMaxMessageBytes,
		CompressionType: CompressionProducer, Delete: true, MinInsyncReplicas: 1, DeleteRetentionMs: DefaultDeleteRetentionMs,
	}
}

// fillDefaults makes a zero TopicConfig Kafka's defaults and replaces the
// zero sizes and codec of a partial one. Retention 0 is a real setting
// (every segment below the high watermark is due), so start a partial
// config from DefaultTopicConfig.
func (c *TopicConfig) fillDefaults() {
	d := DefaultTopicConfig()
	if *c == (TopicConfig{}) {
		*c = d
		return
	}
	if c.SegmentBytes <= 0 {
		c.SegmentBytes = d.SegmentBytes
	}
	c.SegmentBytes = min(c.SegmentBytes, math.MaxInt32)
	if c.SegmentMs <= 0 {
		c.SegmentMs = d.SegmentMs
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = d.MaxMessageBytes
	}
	if c.CompressionType == "" {
		c.CompressionType = d.CompressionType
	}
	if c.MinInsyncReplicas <= 0 {
		c.MinInsyncReplicas = d.MinInsyncReplicas
	}
	if c.DeleteRetentionMs <= 0 {
		c.DeleteRetentionMs = d.DeleteRetentionMs
	}
	if !c.Delete && !c.Compact {
		c.Delete = true
	}
}

// targetCodec is the codec appended batches must have, or -1 for "as sent".
func (c *TopicConfig) targetCodec() int8 {
	if codec, ok := compressionCodecs[c.CompressionType]; ok {
		return codec
	}
	return -1
}

// TopicConfigKey is one topic-level setting: its topic name, the name of the
// broker setting that supplies its default (the cluster-wide or per-broker
// dynamic config, and server.properties), and how a value applies.
type TopicConfigKey struct {
	Topic, Broker string
	set           func(c *TopicConfig, v string) error
}

// TopicConfigKeys lists the topic settings the replica manager applies, with
// Kafka's broker-level synonyms (LogConfig.TopicConfigSynonyms; the broker's
// log.roll.hours and log.retention.minutes/hours are folded into the ms
// names by whoever reads server.properties).
var TopicConfigKeys = []TopicConfigKey{
	{"segment.bytes", "log.segment.bytes", func(c *TopicConfig, v string) error {
		n, err := parseRange(v, 14, math.MaxInt32) // Kafka: atLeast(LegacyRecord.RECORD_OVERHEAD_V0)
		c.SegmentBytes = n
		return err
	}},
	{"segment.ms", "log.roll.ms", func(c *TopicConfig, v string) error {
		n, err := parseRange(v, 1, math.MaxInt64)
		c.SegmentMs = n
		return err
	}},
	{"retention.ms", "log.retention.ms", func(c *TopicConfig, v string) error {
		n, err := parseRange(v, -1, math.MaxInt64)
		c.RetentionMs = n
		return err
	}},
	{"retention.bytes", "log.retention.bytes", func(c *TopicConfig, v string) error {
		n, err := parseRange(v, math.MinInt64, math.MaxInt64)
		c.RetentionBytes = max(n, -1) // Kafka: any negative value is no bound
		return err
	}},
	{"max.message.bytes", "message.max.bytes", func(c *TopicConfig, v string) error {
		n, err := parseRange(v, 0, math.MaxInt32)
		c.MaxMessageBytes = int(n)
		return err
	}},
	{"compression.type", "compression.type", func(c *TopicConfig, v string) error {
		v = strings.ToLower(strings.TrimSpace(v))
		if _, ok := compressionCodecs[v]; !ok && v != CompressionProducer {
			return fmt.Errorf("unknown codec %q", v)
		}
		c.CompressionType = v
		return nil
	}},
	{"min.insync.replicas", "min.insync.replicas", func(c *TopicConfig, v string) error {
		n, err := parseRange(v, 1, math.MaxInt32)
		c.MinInsyncReplicas = int(n)
		return err
	}},
	{"delete.retention.ms", "log.cleaner.delete.retention.ms", func(c *TopicConfig, v string) error {
		n, err := parseRange(v, 0, math.MaxInt64)
		c.DeleteRetentionMs = n
		return err
	}},
	{"cleanup.policy", "log.cleanup.policy", func(c *TopicConfig, v string) error {
		c.Delete, c.Compact = false, false
		for _, p := range strings.Split(v, ",") {
			switch strings.ToLower(strings.TrimSpace(p)) {
			case "delete":
				c.Delete = true
			case "compact":
				c.Compact = true
			case "":
			default:
				return fmt.Errorf("unknown policy %q", p)
			}
		}
		return nil
	}},
}

func parseRange(v string, lo, hi int64) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not an integer", v)
	}
	if n < lo || n > hi {
		return 0, fmt.Errorf("%d is out of range [%d, %d]", n, lo, hi)
	}
	return n, nil
}

// With returns c with the settings lookup finds applied, in TopicConfigKeys
// order; lookup is given a key's topic and broker names and returns the most
// specific value set (topic config, else a dynamic broker default). A value
// that does not parse is skipped (the previous layer's stays) and reported
// in the returned error, which names every bad key; c is still usable.
func (c TopicConfig) With(lookup func(topicKey, brokerKey string) (string, bool)) (TopicConfig, error) {
	var errs []string
	for _, k := range TopicConfigKeys {
		v, ok := lookup(k.Topic, k.Broker)
		if !ok {
			continue
		}
		next := c
		if err := k.set(&next, v); err != nil {
			errs = append(errs, k.Topic+": "+err.Error())
			continue
		}
		c = next
	}
	if !c.Delete && !c.Compact {
		c.Delete = true // an empty cleanup.policy list: Kafka's validator refuses it
	}
	if len(errs) > 0 {
		return c, fmt.Errorf("replica: bad topic config: %s", strings.Join(errs, "; "))
	}
	return c, nil
}
