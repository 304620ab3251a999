package app

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/quorum"
)

// Metric names (all carry the const label node="<node.id>"). The quorum and
// controller packages know nothing of Prometheus: the quorum exposes
// Node.Metrics and a commit-latency hook, the controller its committed image,
// and these collectors read them on scrape.
//
// Quorum (Kafka's raft-metrics group), on every node running a replica:
//
//	kraftd_raft_current_epoch            gauge      current-epoch
//	kraftd_raft_current_leader           gauge      current-leader (-1 when unknown)
//	kraftd_raft_current_state{state}     gauge      current-state: 1 for the node's role, 0 for the others
//	kraftd_raft_high_watermark           gauge      high-watermark (-1 on a new leader until it commits)
//	kraftd_raft_log_start_offset         gauge      log-start-offset (moves only to a snapshot's end)
//	kraftd_raft_log_end_offset           gauge      log-end-offset
//	kraftd_raft_applied_offset           gauge      next offset handed to the state machines
//	kraftd_raft_commit_latency_seconds   histogram  commit-latency-avg/max: leader's Propose to commit delivered
//	kraftd_raft_conflicting_leader_total       counter  requests/responses naming another leader for a known epoch (rejected, logged at ERROR)
//	kraftd_raft_inconsistent_voter_set_total   counter  Vote/BeginQuorumEpoch/EndQuorumEpoch refused with INCONSISTENT_VOTER_SET
//	kraftd_raft_refused_response_total         counter  peers' answers refused (INVALID_REQUEST, unusable content; logged at ERROR, retried)
//	kraftd_raft_observers_untracked_total      counter  leader: Fetches served from observers past the tracked-observer cap
//
// Snapshots (Kafka's SnapshotEmitter metrics), on every KRaft node:
//
//	kraftd_snapshot_latest_generated_bytes    gauge    LatestSnapshotGeneratedBytes (0 before the first)
//	kraftd_snapshot_latest_generated_age_ms   gauge    LatestSnapshotGeneratedAgeMs (since the node started, before the first)
//	kraftd_snapshots_written_total            counter  snapshots this node wrote since it started
//
// Controller (Kafka's KafkaController group), on controller nodes:
//
//	kraftd_controller_active                      gauge      ActiveControllerCount (1 on the quorum leader)
//	kraftd_controller_registered_brokers          gauge      brokers in the committed image
//	kraftd_controller_fenced_brokers              gauge      FencedBrokerCount
//	kraftd_controller_topics                      gauge      GlobalTopicCount
//	kraftd_controller_partitions                  gauge      GlobalPartitionCount
//	kraftd_controller_heartbeats_total            counter    BrokerHeartbeat requests answered
//	kraftd_controller_heartbeat_latency_seconds   histogram  BrokerHeartbeat time from request to answer
//	kraftd_controller_metadata_error_count        gauge      MetadataErrorCount: 1 once committed metadata could not be applied
const (
	metricsNamespace = "kraftd"
	heartbeatKey     = int16(63)
)

// latencyBuckets span 100 µs to ~3 s: a loopback commit is a fsync plus a round
// trip (about a millisecond); the top catches elections and stalled disks.
var latencyBuckets = prometheus.ExponentialBuckets(0.0001, 2.5, 12)

// quorumMetrics holds the quorum role's collectors. The commit histogram exists
// before the Node does (it is the Node's OnCommitLatency hook); the gauges read
// whatever Node quorumRole has, and emit nothing before it started.
type quorumMetrics struct {
	role          *quorumRole
	commitLatency prometheus.Histogram
	descs         map[string]*prometheus.Desc
	counters      map[string]*prometheus.Desc
	state         *prometheus.Desc
}

func newQuorumMetrics(q *quorumRole, node int32) *quorumMetrics {
	labels := nodeLabels(node)
	m := &quorumMetrics{
		role: q,
		commitLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Subsystem: "raft", Name: "commit_latency_seconds",
			Help:        "Time from the leader accepting a proposed batch to its commit being delivered.",
			ConstLabels: labels, Buckets: latencyBuckets,
		}),
		descs:    map[string]*prometheus.Desc{},
		counters: map[string]*prometheus.Desc{},
		state: prometheus.NewDesc("kraftd_raft_current_state",
			"1 for the replica's current role (Kafka's current-state), 0 for the others.", []string{"state"}, labels),
	}
	for name, help := range map[string]string{
		"current_epoch":    "The quorum epoch this replica is in.",
		"current_leader":   "The leader's node id, -1 when unknown.",
		"high_watermark":   "The replica's high watermark (-1 on a leader that has not committed in its epoch).",
		"log_end_offset":   "The end offset of the replica's metadata log.",
		"log_start_offset": "The first offset of the replica's metadata log; below it only a snapshot holds the metadata.",
		"applied_offset":   "The next offset to hand to the controller or broker (every offset below it was delivered).",
	} {
		m.descs[name] = prometheus.NewDesc("kraftd_raft_"+name, help, nil, labels)
	}
	for name, help := range map[string]string{
		"conflicting_leader_total": "Quorum requests and responses that named another leader for an epoch whose leader " +
			"this node knew; each was rejected and logged at ERROR.",
		"inconsistent_voter_set_total": "Vote, BeginQuorumEpoch and EndQuorumEpoch requests refused with " +
			"INCONSISTENT_VOTER_SET: the candidate or leader is not a voter, or this node is an observer.",
		"refused_response_total": "Answers to this node's quorum requests that it refused: INVALID_REQUEST, " +
			"or content it cannot apply (a truncation below its high watermark, an unusable snapshot); each was " +
			"logged at ERROR and handled as a failed request.",
		"observers_untracked_total": "Fetches the leader served from observers it did not track (not listed " +
			"by DescribeQuorum) because it already tracked the maximum number of observers.",
	} {
		m.counters[name] = prometheus.NewDesc("kraftd_raft_"+name, help, nil, labels)
	}
	return m
}

// Describe implements prometheus.Collector.
func (m *quorumMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range m.descs {
		ch <- d
	}
	for _, d := range m.counters {
		ch <- d
	}
	ch <- m.state
	m.commitLatency.Describe(ch)
}

// Collect implements prometheus.Collector: one atomic read of the node's view.
func (m *quorumMetrics) Collect(ch chan<- prometheus.Metric) {
	m.commitLatency.Collect(ch)
	node := m.role.Node()
	if node == nil {
		return
	}
	nm := node.Metrics()
	for name, v := range map[string]float64{
		"current_epoch":    float64(nm.Epoch),
		"current_leader":   float64(nm.LeaderID),
		"high_watermark":   float64(nm.HighWatermark),
		"log_end_offset":   float64(nm.LogEndOffset),
		"log_start_offset": float64(nm.LogStartOffset),
		"applied_offset":   float64(nm.AppliedOffset),
	} {
		ch <- prometheus.MustNewConstMetric(m.descs[name], prometheus.GaugeValue, v)
	}
	for name, v := range map[string]int64{
		"conflicting_leader_total":     nm.ConflictingLeaderTotal,
		"inconsistent_voter_set_total": nm.InconsistentVoterSetTotal,
		"refused_response_total":       nm.RefusedResponseTotal,
		"observers_untracked_total":    nm.ObserversUntrackedTotal,
	} {
		ch <- prometheus.MustNewConstMetric(m.counters[name], prometheus.CounterValue, float64(v))
	}
	for _, r := range []quorum.Role{quorum.Unattached, quorum.Prospective, quorum.Candidate,
		quorum.Leader, quorum.Follower, quorum.Resigned} {
		v := 0.0
		if r == nm.Role {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(m.state, prometheus.GaugeValue, v, roleLabel(r))
	}
}

// roleLabel is Kafka's spelling of current-state values.
func roleLabel(r quorum.Role) string {
	switch r {
	case quorum.Leader:
		return "leader"
	case quorum.Follower:
		return "follower"
	case quorum.Candidate:
		return "candidate"
	case quorum.Prospective:
		return "prospective"
	case quorum.Resigned:
		return "resigned"
	default:
		return "unattached"
	}
}

// observeCommit is the Node's OnCommitLatency hook.
func (m *quorumMetrics) observeCommit(d time.Duration) { m.commitLatency.Observe(d.Seconds()) }

// controllerMetrics holds the controller role's collectors. Broker counts come from
// the controller's committed image, read on scrape; heartbeats are counted by a
// wrapper around the controller's BrokerHeartbeat handler, so the controller's
// event loop does no metrics work.
type controllerMetrics struct {
	ctrl             *controllerRole
	quorum           *quorumRole
	heartbeats       prometheus.Counter
	heartbeatLatency prometheus.Histogram
	active, brokers  *prometheus.Desc
	fenced           *prometheus.Desc
	topics, parts    *prometheus.Desc
	metadataErrors   *prometheus.Desc
}

func newControllerMetrics(c *controllerRole, q *quorumRole, node int32) *controllerMetrics {
	labels := nodeLabels(node)
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("kraftd_controller_"+name, help, nil, labels)
	}
	return &controllerMetrics{
		ctrl: c, quorum: q,
		heartbeats: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: "controller", Name: "heartbeats_total",
			Help: "BrokerHeartbeat requests answered.", ConstLabels: labels,
		}),
		heartbeatLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Subsystem: "controller", Name: "heartbeat_latency_seconds",
			Help:        "BrokerHeartbeat time from request decoded to answer (includes the commit of its records).",
			ConstLabels: labels, Buckets: latencyBuckets,
		}),
		active:  desc("active", "1 while this controller is the active one (the quorum leader), else 0."),
		brokers: desc("registered_brokers", "Brokers registered in the committed metadata image."),
		fenced:  desc("fenced_brokers", "Registered brokers that are fenced in the committed metadata image."),
		topics:  desc("topics", "Topics in the committed metadata image."),
		parts:   desc("partitions", "Partitions in the committed metadata image."),
		metadataErrors: desc("metadata_error_count",
			"1 once a committed record or snapshot could not be applied (Kafka's MetadataErrorCount); the node then exits."),
	}
}

// Describe implements prometheus.Collector.
func (m *controllerMetrics) Describe(ch chan<- *prometheus.Desc) {
	m.heartbeats.Describe(ch)
	m.heartbeatLatency.Describe(ch)
	for _, d := range []*prometheus.Desc{m.active, m.brokers, m.fenced, m.topics, m.parts, m.metadataErrors} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *controllerMetrics) Collect(ch chan<- prometheus.Metric) {
	m.heartbeats.Collect(ch)
	m.heartbeatLatency.Collect(ch)
	active := 0.0
	if node := m.quorum.Node(); node != nil && node.Metrics().Role == quorum.Leader {
		active = 1
	}
	ch <- prometheus.MustNewConstMetric(m.active, prometheus.GaugeValue, active)
	c := m.ctrl.Controller()
	if c == nil {
		return
	}
	failed := 0.0
	if c.Failed() != nil {
		failed = 1
	}
	ch <- prometheus.MustNewConstMetric(m.metadataErrors, prometheus.GaugeValue, failed)
	img, _ := c.CommittedImage()
	brokers := img.Brokers()
	fenced := 0
	for _, b := range brokers {
		if b.Fenced {
			fenced++
		}
	}
	ch <- prometheus.MustNewConstMetric(m.brokers, prometheus.GaugeValue, float64(len(brokers)))
	ch <- prometheus.MustNewConstMetric(m.fenced, prometheus.GaugeValue, float64(fenced))
	ch <- prometheus.MustNewConstMetric(m.topics, prometheus.GaugeValue, float64(img.NumTopics()))
	ch <- prometheus.MustNewConstMetric(m.parts, prometheus.GaugeValue, float64(img.NumPartitions()))
}

// wrapHeartbeats replaces the BrokerHeartbeat handler in reg with one that counts
// answered requests and times them. Call after the controller registered its
// handlers; a registry without the key is left alone.
func (m *controllerMetrics) wrapHeartbeats(reg *protocol.Registry) {
	minV, maxV, h, ok := reg.Lookup(heartbeatKey)
	if !ok {
		return
	}
	reg.Register(heartbeatKey, minV, maxV, func(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
		start := time.Now()
		resp, err := h(ctx, req)
		if err == nil {
			m.heartbeats.Inc()
			m.heartbeatLatency.Observe(time.Since(start).Seconds())
		}
		return resp, err
	})
}

func nodeLabels(node int32) prometheus.Labels {
	return prometheus.Labels{"node": strconv.Itoa(int(node))}
}

// snapshotMetrics reads the snapshot role's counters on scrape.
type snapshotMetrics struct {
	s                   *snapshotRole
	bytes, age, written *prometheus.Desc
}

func newSnapshotMetrics(s *snapshotRole, node int32) *snapshotMetrics {
	labels := nodeLabels(node)
	return &snapshotMetrics{
		s: s,
		bytes: prometheus.NewDesc("kraftd_snapshot_latest_generated_bytes",
			"Size of the latest metadata snapshot this node wrote (Kafka's LatestSnapshotGeneratedBytes); 0 before the first.", nil, labels),
		age: prometheus.NewDesc("kraftd_snapshot_latest_generated_age_ms",
			"Time since this node last wrote a metadata snapshot, or since it started (Kafka's LatestSnapshotGeneratedAgeMs).", nil, labels),
		written: prometheus.NewDesc("kraftd_snapshots_written_total",
			"Metadata snapshots this node wrote since it started.", nil, labels),
	}
}

// Describe implements prometheus.Collector.
func (m *snapshotMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.bytes
	ch <- m.age
	ch <- m.written
}

// Collect implements prometheus.Collector.
func (m *snapshotMetrics) Collect(ch chan<- prometheus.Metric) {
	age := time.Since(time.UnixMilli(m.s.lastAtMs.Load())).Milliseconds()
	ch <- prometheus.MustNewConstMetric(m.bytes, prometheus.GaugeValue, float64(m.s.lastBytes.Load()))
	ch <- prometheus.MustNewConstMetric(m.age, prometheus.GaugeValue, float64(max(age, 0)))
	ch <- prometheus.MustNewConstMetric(m.written, prometheus.CounterValue, float64(m.s.written.Load()))
}
