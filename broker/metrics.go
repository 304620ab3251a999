package broker

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kraftd/kraftd/replica"
)

// Collectors returns the broker's Prometheus metrics for the app to
// register (Kafka's broker-metadata-metrics and lifecycle gauges). They are
// read on scrape from atomics; nothing is updated on the hot path.
func (b *Broker) Collectors() []prometheus.Collector {
	labels := prometheus.Labels{"node": strconv.Itoa(int(b.cfg.NodeID))}
	gauge := func(name, help string, fn func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "kraftd", Subsystem: "broker", Name: name, Help: help, ConstLabels: labels,
		}, fn)
	}
	counter := func(name, help string, fn func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "kraftd", Subsystem: "broker", Name: name, Help: help, ConstLabels: labels,
		}, fn)
	}
	return append([]prometheus.Collector{
		gauge("metadata_applied_offset", "Offset of the last metadata record or batch the published image covers.",
			func() float64 { return float64(b.pub.appliedOffset.Load()) }),
		gauge("last_applied_record_lag_ms", "Wall-clock time since the append time of the last applied metadata batch.",
			func() float64 { return float64(b.lastAppliedLagMs()) }),
		counter("metadata_images_published_total", "Metadata images published.",
			func() float64 { return float64(b.pub.publishes.Load()) }),
		counter("heartbeats_total", "Broker heartbeats answered without error.",
			func() float64 { return float64(b.life.heartbeats.Load()) }),
		counter("controller_request_failures_total", "Registration and heartbeat attempts that failed.",
			func() float64 { return float64(b.life.failures.Load()) }),
		gauge("fenced", "1 while the controller reports this broker fenced.",
			func() float64 { return boolFloat(b.life.fenced.Load()) }),
		gauge("state", "Broker state as Kafka's BrokerState numbers (3 = RUNNING).",
			func() float64 { return float64(b.life.State()) }),
		gauge("metadata_apply_failed", "1 once a committed record could not be applied.",
			func() float64 { return boolFloat(b.pub.failed.Load()) }),
	}, ReplicaCollectors(b.cfg.NodeID, b.cfg.Replicas)...)
}

// PendingPartitionFileWritesMetric is the gauge of ReplicaCollectors that
// kraftd bench waits on before its faults ("logs durable").
const PendingPartitionFileWritesMetric = "kraftd_broker_partition_metadata_pending_writes"

// ReplicaCollectors returns the gauges of a broker's replica manager (none
// for nil), for the KRaft broker (Collectors) and the zk-legacy broker alike:
// the partition.metadata files of new logs not written yet. Those are the
// only per-partition files written in the background (a new log's first
// segment becomes durable with its partition.metadata's directory fsync);
// a broker stopped while some are pending writes them before it exits.
func ReplicaCollectors(nodeID int32, m *replica.Manager) []prometheus.Collector {
	if m == nil {
		return nil
	}
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        PendingPartitionFileWritesMetric,
			Help:        "New partition logs whose partition.metadata file (topic id, written with a file and a directory fsync) the background writer has not written yet.",
			ConstLabels: prometheus.Labels{"node": strconv.Itoa(int(nodeID))},
		}, func() float64 { return float64(m.PendingTopicIDWrites()) }),
	}
}

// lastAppliedLagMs is Kafka's last-applied-record-lag-ms: now minus the
// append time of the last applied batch; 0 before any.
func (b *Broker) lastAppliedLagMs() int64 {
	ts := b.pub.appliedTsMs.Load()
	if ts < 0 {
		return 0
	}
	return max(0, b.cfg.Now().UnixMilli()-ts)
}

func boolFloat(v bool) float64 {
	if v {
		return 1
	}
	return 0
}
