package broker

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/metadata/records"
	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/replica"
)

// staticSource serves one fixed image.
type staticSource struct{ img *image.Image }

func (s staticSource) Image() *image.Image { return s.img }

// recordingAdmin records the admin requests it gets and answers them
// with err, or with a success per topic.
type recordingAdmin struct {
	mu      sync.Mutex
	created []string
	got     chan struct{} // one send per CreateTopics
	err     error
}

func (a *recordingAdmin) CreateTopics(_ context.Context, req *kmsg.CreateTopicsRequest) (*kmsg.CreateTopicsResponse, error) {
	a.mu.Lock()
	for _, t := range req.Topics {
		a.created = append(a.created, t.Topic)
	}
	a.mu.Unlock()
	if a.got != nil {
		a.got <- struct{}{}
	}
	if a.err != nil {
		return nil, a.err
	}
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func (a *recordingAdmin) DeleteTopics(context.Context, *kmsg.DeleteTopicsRequest) (*kmsg.DeleteTopicsResponse, error) {
	return nil, a.err
}

func (a *recordingAdmin) CreatePartitions(context.Context, *kmsg.CreatePartitionsRequest) (*kmsg.CreatePartitionsResponse, error) {
	return nil, a.err
}

func (a *recordingAdmin) ElectLeaders(context.Context, *kmsg.ElectLeadersRequest) (*kmsg.ElectLeadersResponse, error) {
	return nil, a.err
}

// legacyImage is what a ZooKeeper-era cache could hold: brokers 1 and 2
// unfenced on PLAINTEXT, topic foo with one partition led by 2.
func legacyImage(t testing.TB) *image.Image {
	t.Helper()
	d := image.NewDelta(image.Empty())
	recs := []records.Message{
		brokerRecord(1, 10, false, nil, ep("PLAINTEXT", 9001)),
		brokerRecord(2, 11, false, nil, ep("PLAINTEXT", 9002)),
		topicRecord("foo", fooID),
		partitionRecord(fooID, 0, 2, []int32{2, 1}, []int32{2, 1}),
	}
	for i, m := range recs {
		if err := d.Replay(int64(i), 1, records.Record{Version: versionFor(m), Message: m}); err != nil {
			t.Fatal(err)
		}
	}
	return d.Apply()
}

func newTestClientAPI(t *testing.T, admin Admin, mutate func(*ClientAPIConfig)) *ClientAPI {
	t.Helper()
	cfg := ClientAPIConfig{NodeID: 1, ClusterID: testCluster, Metadata: staticSource{legacyImage(t)},
		Admin: admin, InterBrokerListener: "PLAINTEXT", Logger: zaptest.NewLogger(t)}
	if mutate != nil {
		mutate(&cfg)
	}
	c, err := NewClientAPI(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func call(t *testing.T, h protocol.Handler, body kmsg.Request) kmsg.Response {
	t.Helper()
	resp, err := h(context.Background(), &protocol.Request{Key: body.Key(), Version: body.GetVersion(),
		Body: body, Listener: "PLAINTEXT"})
	if err != nil {
		t.Fatal(err)
	}
	if sf, ok := resp.(*splicedFetch); ok { // records sent from files: read them
		defer sf.Release()
		m, err := sf.materialize()
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	return resp
}

func TestClientAPIControllerIDPolicy(t *testing.T) {
	c := newTestClientAPI(t, &recordingAdmin{}, func(cfg *ClientAPIConfig) {
		cfg.ControllerID = func(*image.Image, string) int32 { return 2 }
	})
	req := metadataRequest(12, "foo")
	m := call(t, c.handleMetadata, req).(*kmsg.MetadataResponse)
	if m.ControllerID != 2 || *m.ClusterID != testCluster {
		t.Fatalf("controller %d cluster %v, want 2 and %s", m.ControllerID, *m.ClusterID, testCluster)
	}
	if foo := findTopic(t, m, "foo"); foo.Partitions[0].Leader != 2 {
		t.Fatalf("foo-0 leader %d, want 2", foo.Partitions[0].Leader)
	}
	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.SetVersion(1)
	dc.EndpointType = 1
	if got := call(t, c.handleDescribeCluster, dc).(*kmsg.DescribeClusterResponse).ControllerID; got != 2 {
		t.Fatalf("DescribeCluster controller %d, want 2", got)
	}
	// Without a policy: a random alive broker, always one of 1 and 2.
	kraft := newTestClientAPI(t, &recordingAdmin{}, nil)
	for range 20 {
		if id := call(t, kraft.handleMetadata, metadataRequest(12)).(*kmsg.MetadataResponse).ControllerID; id != 1 && id != 2 {
			t.Fatalf("random alive broker policy answered %d", id)
		}
	}
}

func TestClientAPIAdminErrorIsUnknownServerError(t *testing.T) {
	c := newTestClientAPI(t, &recordingAdmin{err: errors.New("zk: connection loss")}, nil)
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.SetVersion(7)
	ct.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "a", NumPartitions: 1, ReplicationFactor: 1}}
	rt := call(t, c.handleCreateTopics, ct).(*kmsg.CreateTopicsResponse).Topics
	if len(rt) != 1 || rt[0].ErrorCode != kerr.UnknownServerError.Code || rt[0].Topic != "a" {
		t.Fatalf("CreateTopics answer %+v", rt)
	}
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.SetVersion(5)
	dt.TopicNames = []string{"a", "b"}
	dr := call(t, c.handleDeleteTopics, dt).(*kmsg.DeleteTopicsResponse).Topics
	if len(dr) != 2 || dr[1].ErrorCode != kerr.UnknownServerError.Code || *dr[1].Topic != "b" {
		t.Fatalf("DeleteTopics answer %+v", dr)
	}
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "a", Count: 3}}
	cr := call(t, c.handleCreatePartitions, cp).(*kmsg.CreatePartitionsResponse).Topics
	if len(cr) != 1 || cr[0].ErrorCode != kerr.UnknownServerError.Code {
		t.Fatalf("CreatePartitions answer %+v", cr)
	}
}

func TestClientAPIAutoCreateGoesToAdmin(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	admin := &recordingAdmin{got: make(chan struct{}, 1)}
	c := newTestClientAPI(t, admin, func(cfg *ClientAPIConfig) { cfg.AutoCreateTopicsEnable = true })
	req := metadataRequest(9, "fresh", "bad/name")
	req.AllowAutoTopicCreation = true
	m := call(t, c.handleMetadata, req).(*kmsg.MetadataResponse)
	if code := findTopic(t, m, "fresh").ErrorCode; code != kerr.LeaderNotAvailable.Code {
		t.Fatalf("fresh: error %d, want LEADER_NOT_AVAILABLE", code)
	}
	if code := findTopic(t, m, "bad/name").ErrorCode; code != kerr.InvalidTopicException.Code {
		t.Fatalf("bad/name: error %d, want INVALID_TOPIC_EXCEPTION", code)
	}
	select {
	case <-admin.got:
	case <-time.After(2 * time.Second):
		t.Fatal("no CreateTopics reached the admin")
	}
	c.Close()
	admin.mu.Lock()
	defer admin.mu.Unlock()
	if len(admin.created) != 1 || admin.created[0] != "fresh" {
		t.Fatalf("admin created %v, want [fresh]", admin.created)
	}
}

func TestClientAPIStaticConfigs(t *testing.T) {
	c := newTestClientAPI(t, &recordingAdmin{}, func(cfg *ClientAPIConfig) {
		cfg.StaticConfigs = []StaticConfig{{"zookeeper.connect", "127.0.0.1:2181", kmsg.ConfigTypeString}}
	})
	req := kmsg.NewPtrDescribeConfigsRequest()
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
	req.Resources = append(req.Resources, r)
	res := call(t, c.handleDescribeConfigs, req).(*kmsg.DescribeConfigsResponse).Resources[0]
	if res.ErrorCode != 0 || len(res.Configs) != 1 || *res.Configs[0].Value != "127.0.0.1:2181" ||
		res.Configs[0].Source != kmsg.ConfigSourceStaticBrokerConfig {
		t.Fatalf("DescribeConfigs broker 1: %+v", res)
	}
}

func TestNewClientAPIValidates(t *testing.T) {
	if _, err := NewClientAPI(ClientAPIConfig{ClusterID: "x"}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("no metadata/admin: %v", err)
	}
	if _, err := NewClientAPI(ClientAPIConfig{Metadata: staticSource{image.Empty()}, Admin: &recordingAdmin{}}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("no cluster id: %v", err)
	}
	if _, err := NewClientAPI(ClientAPIConfig{ClusterID: "x", Metadata: staticSource{image.Empty()}, Admin: &recordingAdmin{},
		MaxVersions: map[int16]int16{3: -1}}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Metadata capped below v0: %v", err)
	}
	// A data plane without the inter-broker listener's name: the
	// transaction coordinator could reach no other broker (zk-legacy
	// brokers were wired so, and every transaction spanning brokers hung).
	rm, err := replica.New(replica.Config{Dir: t.TempDir(), BrokerID: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rm.Close() })
	if _, err := NewClientAPI(ClientAPIConfig{ClusterID: "x", Metadata: staticSource{image.Empty()}, Admin: &recordingAdmin{},
		Replicas: rm, ProducerIDs: &countingProducerIDs{}}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("transaction coordinator without InterBrokerListener: %v", err)
	}
}

// MaxVersions caps what Register serves and ClientAPIVersions lists alike
// (the zk-legacy listener advertises the latter before the former exists).
func TestClientAPIMaxVersions(t *testing.T) {
	caps := map[int16]int16{3: 12, 60: 5}
	c := newTestClientAPI(t, &recordingAdmin{}, func(cfg *ClientAPIConfig) { cfg.MaxVersions = caps })
	reg := protocol.NewRegistry()
	c.Register(reg)
	if _, maxV, _, ok := reg.Lookup(3); !ok || maxV != 12 {
		t.Fatalf("Metadata served up to v%d", maxV)
	}
	if _, maxV, _, _ := reg.Lookup(60); maxV != 2 {
		t.Fatalf("a cap above the newest version changed DescribeCluster to v%d", maxV)
	}
	for _, v := range ClientAPIVersions(false, false, false, caps) {
		if minV, maxV, _, ok := reg.Lookup(v.ApiKey); !ok || minV != v.MinVersion || maxV != v.MaxVersion {
			t.Errorf("API %d listed v%d-v%d, served v%d-v%d (%v)", v.ApiKey, v.MinVersion, v.MaxVersion, minV, maxV, ok)
		}
	}
}

// TestMetadataInvalidTopicName: without auto-creation (disabled, or not
// allowed by the request), a requested name Kafka's Topic.validate refuses
// is INVALID_TOPIC_EXCEPTION and a valid unknown one
// UNKNOWN_TOPIC_OR_PARTITION, as in Kafka's getTopicMetadata; with it, the
// invalid name is INVALID_TOPIC_EXCEPTION too (AutoTopicCreationManager).
func TestMetadataInvalidTopicName(t *testing.T) {
	long := strings.Repeat("x", 250)
	names := []string{"fresh", "bad/name", "", ".", "..", long, "caf\u00e9", "__share_group_state"}
	want := map[string]int16{
		"fresh": kerr.UnknownTopicOrPartition.Code, "__share_group_state": kerr.UnknownTopicOrPartition.Code,
		"bad/name": kerr.InvalidTopicException.Code, "": kerr.InvalidTopicException.Code,
		".": kerr.InvalidTopicException.Code, "..": kerr.InvalidTopicException.Code,
		long: kerr.InvalidTopicException.Code, "caf\u00e9": kerr.InvalidTopicException.Code,
	}
	for _, tc := range []struct {
		name       string
		enable     bool
		allow      bool
		autoCreate bool
	}{
		{"auto-create off", false, true, false},
		{"request disallows", true, false, false},
		{"auto-create on", true, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			admin := &recordingAdmin{got: make(chan struct{}, 1)}
			c := newTestClientAPI(t, admin, func(cfg *ClientAPIConfig) { cfg.AutoCreateTopicsEnable = tc.enable })
			defer c.Close()
			req := metadataRequest(9, names...)
			req.AllowAutoTopicCreation = tc.allow
			m := call(t, c.handleMetadata, req).(*kmsg.MetadataResponse)
			for _, n := range names {
				got := findTopic(t, m, n)
				w := want[n]
				if tc.autoCreate && w == kerr.UnknownTopicOrPartition.Code {
					w = kerr.LeaderNotAvailable.Code
				}
				if got.ErrorCode != w {
					t.Errorf("%.20q: error %d, want %d", n, got.ErrorCode, w)
				}
				if got.IsInternal != (n == "__share_group_state") {
					t.Errorf("%.20q: IsInternal %t", n, got.IsInternal)
				}
			}
		})
	}
}

func TestIsInternalTopic(t *testing.T) {
	for name, want := range map[string]bool{
		"__consumer_offsets": true, "__transaction_state": true, "__share_group_state": true,
		"__cluster_metadata": false, "_schemas": false, "__consumer_offsets2": false, "": false,
	} {
		if got := IsInternalTopic(name); got != want {
			t.Errorf("IsInternalTopic(%q) = %t", name, got)
		}
	}
}
