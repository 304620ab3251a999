package broker

import (
	"context"
	"math/rand/v2"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap/zaptest"

	"github.com/kraftd/kraftd/metadata/records"
	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

const testCluster = "kraftd-test-cluster-1"

// harness is one broker whose client listener is served by a real
// protocol.Server on 127.0.0.1 and whose metadata is fed by the test
// through the publisher, as the quorum Node would.
type harness struct {
	t      testing.TB
	b      *Broker
	srv    *protocol.Server
	addr   string // the PLAINTEXT listener
	client *protocol.Client
	next   int64 // next metadata offset
}

// newHarness builds a broker listening on PLAINTEXT (plus the extra
// advertised listeners). mutate may change the config before New. Only the
// publisher runs unless start is called.
func newHarness(t testing.TB, mutate func(*Config)) *harness {
	t.Helper()
	reg := protocol.NewRegistry()
	srv, err := protocol.NewServer(protocol.ServerConfig{
		Listeners: []protocol.ListenerConfig{{Name: "PLAINTEXT", Addr: "127.0.0.1:0", Registry: reg}},
		Logger:    zaptest.NewLogger(t).Named("server"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	addr := srv.Addr("PLAINTEXT").String()
	host, portText, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portText)
	cfg := Config{
		NodeID:          1,
		ClusterID:       testCluster,
		Listeners:       []Endpoint{{Name: "PLAINTEXT", Host: host, Port: uint16(port)}},
		ControllerAddrs: map[int32]string{3000: "127.0.0.1:1"},
		Rand:            rand.New(rand.NewPCG(1, 2)),
		Logger:          zaptest.NewLogger(t),
	}
	if mutate != nil {
		mutate(&cfg)
	}
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.RegisterHandlers(reg)
	h := &harness{t: t, b: b, srv: srv, addr: addr,
		client: protocol.NewClient(protocol.ClientConfig{Logger: zaptest.NewLogger(t).Named("client")})}
	t.Cleanup(func() {
		_ = h.client.Close()
		_ = srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = b.Stop(ctx)
	})
	return h
}

// runPublisher starts only the publisher goroutine (handler tests do not
// need a controller).
func (h *harness) runPublisher() {
	h.b.wg.Go(func() { h.b.pub.run(h.b.bgCtx) })
}

// commit delivers msgs as one committed batch at the next offsets and waits
// until the broker published it. It returns the batch's last offset.
func (h *harness) commit(msgs ...records.Message) int64 {
	h.t.Helper()
	b := encodeBatch(h.t, h.next, msgs...)
	h.next = b.NextOffset()
	commitTo(h.b.Listener(), []raftlog.Batch{b})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := h.b.WaitApplied(ctx, b.LastOffset); err != nil {
		h.t.Fatal(err)
	}
	return b.LastOffset
}

// request sends req to the broker at the version it carries.
func (h *harness) request(req kmsg.Request) kmsg.Response {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := h.client.Request(ctx, h.addr, req)
	if err != nil {
		h.t.Fatalf("%T v%d: %v", req, req.GetVersion(), err)
	}
	return resp
}

// encodeBatch frames msgs (each at its highest version that fits the
// fields set; tests use fields valid at the chosen versions) into one
// RecordBatch.
func encodeBatch(t testing.TB, base int64, msgs ...records.Message) raftlog.Batch {
	t.Helper()
	recs := make([]raftlog.Record, 0, len(msgs))
	for _, m := range msgs {
		v, err := records.Record{Version: versionFor(m), Message: m}.AppendTo(nil)
		if err != nil {
			t.Fatalf("encoding %T: %v", m, err)
		}
		recs = append(recs, raftlog.Record{Value: v})
	}
	return raftlog.EncodeBatch(base, 1, time.Now().UnixMilli(), false, recs)
}

// versionFor picks the record version kraftd's default metadata.version
// (3.6-IV2) writes.
func versionFor(m records.Message) int16 {
	switch m.(type) {
	case *records.RegisterBrokerRecord:
		return 2
	case *records.BrokerRegistrationChangeRecord:
		return 1
	}
	return 0
}

// Record builders.

func uuid(b byte) records.UUID {
	return records.UUID{b, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, b}
}

func mvRecord(level int16) *records.FeatureLevelRecord {
	return &records.FeatureLevelRecord{Name: "metadata.version", FeatureLevel: level}
}

// brokerRecord registers id (fenced unless unfenced) with the given
// listeners, each "NAME:port" on 127.0.0.1.
func brokerRecord(id int32, epoch int64, fenced bool, rack *string, listeners ...records.BrokerEndpoint) *records.RegisterBrokerRecord {
	r := records.NewRegisterBrokerRecord()
	r.BrokerID, r.BrokerEpoch, r.Fenced, r.Rack = id, epoch, fenced, rack
	r.IncarnationID = uuid(byte(100 + id))
	r.EndPoints = listeners
	r.Features = []records.BrokerFeature{{Name: "metadata.version", MinSupportedVersion: 7, MaxSupportedVersion: 21}}
	return r
}

func ep(name string, port uint16) records.BrokerEndpoint {
	return records.BrokerEndpoint{Name: name, Host: "127.0.0.1", Port: port}
}

func topicRecord(name string, id records.UUID) *records.TopicRecord {
	return &records.TopicRecord{Name: name, TopicID: id}
}

func partitionRecord(topic records.UUID, p, leader int32, replicas, isr []int32) *records.PartitionRecord {
	r := &records.PartitionRecord{}
	r.Default()
	r.TopicID, r.PartitionID, r.Leader, r.Replicas, r.ISR = topic, p, leader, replicas, isr
	r.LeaderEpoch, r.PartitionEpoch = 0, 0
	return r
}

// commitTo delivers committed batches to l as a quorum Node whose local log
// holds everything committed does: the high watermark first (for a
// HighWatermarkListener; the publisher's initial catch-up ends at the first),
// then the batches.
func commitTo(l quorum.Listener, batches []raftlog.Batch) {
	if hl, ok := l.(quorum.HighWatermarkListener); ok && len(batches) > 0 {
		hl.HandleHighWatermark(batches[len(batches)-1].NextOffset())
	}
	l.HandleCommit(batches)
}
