package broker

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/quorum"
)

// TestCreateTopicsForwarded: kadm.CreateTopics through the broker reaches the
// active controller after the standby's NOT_CONTROLLER, the answer comes
// back, and the broker serves the topic once the records are applied.
func TestCreateTopicsForwarded(t *testing.T) {
	h, standby, active := lifecycleHarness(t, nil)
	h.runPublisher()
	// kadm sends CreateTopics to Metadata's ControllerID: a live broker.
	h.commit(brokerRecord(1, 0, false, nil, ep("PLAINTEXT", h.b.cfg.Listeners[0].Port)))
	active.attach(h.b.Listener(), h.next)
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := adm.CreateTopics(ctx, 3, 1, nil, "created")
	if err != nil {
		t.Fatal(err)
	}
	ct := resp["created"]
	if ct.Err != nil || ct.NumPartitions != 3 || ct.ID == (kadm.TopicID{}) {
		t.Fatalf("create response %+v", ct)
	}
	standby.mu.Lock()
	sawStandby := standby.requests[19]
	standby.mu.Unlock()
	if sawStandby == 0 {
		t.Error("the standby controller (first in round-robin) was never tried")
	}
	active.mu.Lock()
	last := active.next - 1
	active.mu.Unlock()
	if err := h.b.WaitApplied(ctx, last); err != nil {
		t.Fatal(err)
	}
	topics, err := adm.ListTopics(ctx, "created")
	if err != nil || topics["created"].Err != nil || len(topics["created"].Partitions) != 3 {
		t.Fatalf("metadata after create: %+v %v", topics, err)
	}
}

// TestForwardTimesOut: with no active controller the client gets
// REQUEST_TIMED_OUT for every topic, within the request's timeout.
func TestForwardTimesOut(t *testing.T) {
	standby := newFakeController(t, false, nil)
	h := newHarness(t, func(c *Config) { c.ControllerAddrs = map[int32]string{3000: standby.addr} })
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(5)
	req.TimeoutMillis = 200
	for _, n := range []string{"a", "b"} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = n, 1, 1
		req.Topics = append(req.Topics, rt)
	}
	start := time.Now()
	resp := h.request(req).(*kmsg.CreateTopicsResponse)
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("took %v", took)
	}
	if len(resp.Topics) != 2 || resp.Version != 5 {
		t.Fatalf("response %+v", resp)
	}
	for _, rt := range resp.Topics {
		if rt.ErrorCode != kerr.RequestTimedOut.Code {
			t.Errorf("%s: error %d, want REQUEST_TIMED_OUT", rt.Topic, rt.ErrorCode)
		}
	}
}

// TestForwardNegotiatesDown: a client version above the controller's max is
// sent at the controller's max and answered at the client's version; the
// broker's ApiVersions then caps CreateTopics at the controller's max and
// carries the finalized features of its image.
func TestForwardNegotiatesDown(t *testing.T) {
	active := newFakeController(t, true, map[int16]int16{19: 4})
	var sentVersion int16 = -1
	active.onCreate = func(r *kmsg.CreateTopicsRequest) { sentVersion = r.Version }
	h := newHarness(t, func(c *Config) { c.ControllerAddrs = map[int32]string{3001: active.addr} })
	h.runPublisher()
	h.commit(mvRecord(14))
	active.attach(h.b.Listener(), h.next)
	h.b.Listener().HandleLeaderChange(quorum.LeaderAndEpoch{LeaderID: 3001, Epoch: 1, EpochStartOffset: -1})

	req := createOneTopic("neg", 1000)
	resp := h.request(req).(*kmsg.CreateTopicsResponse)
	active.mu.Lock()
	got := sentVersion
	active.mu.Unlock()
	if got != 4 || resp.Version != 7 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("sent v%d, answered v%d error %d", got, resp.Version, resp.Topics[0].ErrorCode)
	}

	if err := h.b.WaitApplied(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(3)
	av.ClientSoftwareName, av.ClientSoftwareVersion = "test", "1"
	avr := h.request(av).(*kmsg.ApiVersionsResponse)
	i := slices.IndexFunc(avr.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool { return k.ApiKey == 19 })
	if i < 0 || avr.ApiKeys[i].MaxVersion != 4 {
		t.Errorf("advertised CreateTopics %+v, want max 4", avr.ApiKeys)
	}
	if len(avr.FinalizedFeatures) != 1 || avr.FinalizedFeatures[0].MaxVersionLevel != 14 ||
		avr.FinalizedFeaturesEpoch != h.b.AppliedOffset() || len(avr.SupportedFeatures) != 1 ||
		avr.SupportedFeatures[0].MaxVersion != DefaultMaxMetadataVersion {
		t.Errorf("features: finalized %+v epoch %d supported %+v", avr.FinalizedFeatures, avr.FinalizedFeaturesEpoch, avr.SupportedFeatures)
	}
}

// TestDescribeQuorumForwarded: DescribeQuorum skips the controller that is
// not the raft leader.
func TestDescribeQuorumForwarded(t *testing.T) {
	h, _, _ := lifecycleHarness(t, nil)
	req := kmsg.NewPtrDescribeQuorumRequest()
	req.SetVersion(1)
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
	req.Topics = append(req.Topics, rt)
	resp := h.request(req).(*kmsg.DescribeQuorumResponse)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].LeaderID != 3000 ||
		resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("describe quorum %+v", resp)
	}
}

// TestMetadataAutoCreate: with auto.create.topics.enable a missing topic
// answers LEADER_NOT_AVAILABLE and a CreateTopics reaches the controller;
// without it the answer is UNKNOWN_TOPIC_OR_PARTITION.
func TestMetadataAutoCreate(t *testing.T) {
	h, _, active := lifecycleHarness(t, func(c *Config) { c.AutoCreateTopicsEnable = true; c.DefaultNumPartitions = 2 })
	h.runPublisher()
	h.b.Listener().HandleLeaderChange(quorum.LeaderAndEpoch{LeaderID: 3001, Epoch: 1, EpochStartOffset: -1})
	req := metadataRequest(9, "auto", "bad name!")
	req.AllowAutoTopicCreation = true
	resp := h.request(req).(*kmsg.MetadataResponse)
	if resp.Topics[0].ErrorCode != kerr.LeaderNotAvailable.Code || resp.Topics[1].ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("auto-create answers %d %d", resp.Topics[0].ErrorCode, resp.Topics[1].ErrorCode)
	}
	active.waitFor("an auto CreateTopics", func() bool { return active.requests[19] > 0 })
	active.waitFor("the topic records", func() bool { return active.next > 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	active.mu.Lock()
	last := active.next - 1
	active.mu.Unlock()
	if err := h.b.WaitApplied(ctx, last); err != nil {
		t.Fatal(err)
	}
	if top, ok := h.b.Image().TopicByName("auto"); !ok || top.NumPartitions() != 2 {
		t.Fatalf("auto topic not created with num.partitions")
	}
	noAuto := metadataRequest(9, "other")
	if r := h.request(noAuto).(*kmsg.MetadataResponse); r.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("AllowAutoTopicCreation=false: error %d", r.Topics[0].ErrorCode)
	}
}

// stalledController accepts connections and reads requests but never
// answers, as a SIGSTOPped controller process looks from the network (the
// kernel completes the handshake, nothing replies). got is closed at the
// first bytes received.
func stalledController(t *testing.T) (addr string, got <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, 4096)
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
					once.Do(func() { close(ch) })
				}
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String(), ch
}

// TestForwardMovesToNewController: a CreateTopics forwarded to an active
// controller that stops answering (paused) goes to the next one as soon as
// the quorum names it, and is answered by it, well within the request's
// timeout. Before, the broker waited out the whole client timeout (60 s in
// the bench) on the paused one and answered REQUEST_TIMED_OUT.
func TestForwardMovesToNewController(t *testing.T) {
	pausedAddr, reached := stalledController(t)
	active := newFakeController(t, true, nil)
	h := newHarness(t, func(c *Config) { c.ControllerAddrs = map[int32]string{3000: pausedAddr, 3001: active.addr} })
	h.runPublisher()
	active.attach(h.b.Listener(), h.next)
	h.b.Listener().HandleLeaderChange(quorum.LeaderAndEpoch{LeaderID: 3000, Epoch: 1, EpochStartOffset: -1})
	go func() {
		<-reached // the request is stuck at the paused controller
		h.b.Listener().HandleLeaderChange(quorum.LeaderAndEpoch{LeaderID: 3001, Epoch: 2, EpochStartOffset: -1})
	}()
	req := createOneTopic("moved", 10000)
	start := time.Now()
	resp := h.request(req).(*kmsg.CreateTopicsResponse)
	took := time.Since(start)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("after %v: response %+v, want the new controller's success", took, resp.Topics)
	}
	if took > 5*time.Second {
		t.Fatalf("answered after %v, want well within the 10 s timeout", took)
	}
	active.mu.Lock()
	n := active.requests[19]
	active.mu.Unlock()
	if n != 1 {
		t.Fatalf("new controller saw %d CreateTopics, want 1", n)
	}
}

// TestForwardAttemptTimeoutAsksOtherControllers: the quorum still names a
// controller that stopped answering (paused: its connection stays up) and
// never names another, as a broker's own quorum view can lag the election by
// a fetch timeout. Once the attempt has waited a quarter of the controller
// request timeout, the other controllers get the request too, and the one
// that now leads answers it, long before the request's own timeout. Before,
// the broker waited out the whole request timeout on the paused one and
// answered REQUEST_TIMED_OUT.
func TestForwardAttemptTimeoutAsksOtherControllers(t *testing.T) {
	pausedAddr, reached := stalledController(t)
	standby := newFakeController(t, false, nil)
	active := newFakeController(t, true, nil)
	h := newHarness(t, func(c *Config) {
		c.ControllerAddrs = map[int32]string{3000: pausedAddr, 3001: standby.addr, 3002: active.addr}
		c.ControllerRequestTimeoutMs = 400 // attempts time out after 100 ms
	})
	h.runPublisher()
	active.attach(h.b.Listener(), h.next)
	h.b.Listener().HandleLeaderChange(quorum.LeaderAndEpoch{LeaderID: 3000, Epoch: 1, EpochStartOffset: -1})
	req := createOneTopic("hedged", 3000)
	start := time.Now()
	resp := h.request(req).(*kmsg.CreateTopicsResponse)
	took := time.Since(start)
	select {
	case <-reached:
	default:
		t.Fatal("the request never reached the controller the quorum names")
	}
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("after %v: response %+v, want the active controller's success", took, resp.Topics)
	}
	if took > 2*time.Second {
		t.Fatalf("answered after %v, want well within the 3 s request timeout", took)
	}
	active.mu.Lock()
	n := active.requests[19]
	active.mu.Unlock()
	if n != 1 {
		t.Fatalf("active controller saw %d CreateTopics, want 1", n)
	}
}

// TestForwardAttemptTimeoutKeepsSlowController: a live active controller
// slower than the attempt timeout still answers the forwarded request, and
// gets it once: the copies go only to the other controllers (which answer
// NOT_CONTROLLER), so a slow CreateTopics is never sent to it again (a second
// copy would answer TOPIC_ALREADY_EXISTS for the topic the first created).
func TestForwardAttemptTimeoutKeepsSlowController(t *testing.T) {
	slow := newFakeController(t, true, nil)
	slow.onCreate = func(*kmsg.CreateTopicsRequest) { time.Sleep(400 * time.Millisecond) }
	standby := newFakeController(t, false, nil)
	h := newHarness(t, func(c *Config) {
		c.ControllerAddrs = map[int32]string{3000: slow.addr, 3001: standby.addr}
		c.ControllerRequestTimeoutMs = 200 // attempts time out after 50 ms
	})
	h.runPublisher()
	slow.attach(h.b.Listener(), h.next)
	h.b.Listener().HandleLeaderChange(quorum.LeaderAndEpoch{LeaderID: 3000, Epoch: 1, EpochStartOffset: -1})
	req := createOneTopic("slow", 3000)
	resp := h.request(req).(*kmsg.CreateTopicsResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("response %+v, want the slow controller's success", resp.Topics)
	}
	slow.mu.Lock()
	n := slow.requests[19]
	slow.mu.Unlock()
	standby.mu.Lock()
	asked := standby.requests[19]
	standby.mu.Unlock()
	if n != 1 || asked == 0 {
		t.Fatalf("slow controller saw %d CreateTopics (want 1), the standby %d (want some)", n, asked)
	}
}

// TestForwardRetriesTheQuorumLeader: the quorum names a controller that has
// just won the election and refuses (NOT_CONTROLLER) until its first commit
// activates it. The request goes to it again, as Kafka's channel manager
// resends to the controller its metadata names, not round-robin to the
// others: a standby can only refuse too, and the dead former leader (here a
// controller that never answers) held the request until the attempt timeout
// (2 s here; the broker answered after 2.0 s, having asked the standby and the
// dead one first).
func TestForwardRetriesTheQuorumLeader(t *testing.T) {
	deadAddr, reached := stalledController(t)
	standby := newFakeController(t, false, nil)
	elected := newFakeController(t, false, nil)
	refusals := 0
	elected.onCreate = func(*kmsg.CreateTopicsRequest) { // called with elected.mu held
		if refusals++; refusals > 2 {
			elected.active = true // its first commit in the new epoch
		}
	}
	h := newHarness(t, func(c *Config) {
		c.ControllerAddrs = map[int32]string{3000: elected.addr, 3001: standby.addr, 3002: deadAddr}
		c.ControllerRequestTimeoutMs = 8000 // attempts time out (and the others are tried) after 2 s
	})
	h.runPublisher()
	elected.attach(h.b.Listener(), h.next)
	h.b.Listener().HandleLeaderChange(quorum.LeaderAndEpoch{LeaderID: 3000, Epoch: 2, EpochStartOffset: -1})
	req := createOneTopic("retried", 5000)
	start := time.Now()
	resp := h.request(req).(*kmsg.CreateTopicsResponse)
	took := time.Since(start)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("after %v: response %+v, want the elected controller's success", took, resp.Topics)
	}
	elected.mu.Lock()
	n := elected.requests[19]
	elected.mu.Unlock()
	standby.mu.Lock()
	asked := standby.requests[19]
	standby.mu.Unlock()
	select {
	case <-reached:
		t.Error("the request went to a controller the quorum does not name (the dead one)")
	default:
	}
	if n != 3 || asked != 0 || took > time.Second {
		t.Fatalf("answered after %v; the elected controller saw %d CreateTopics (want 3), the standby %d (want 0)", took, n, asked)
	}
}

// TestForwardFallsBackFromARefusingLeader: the broker's quorum view names a
// controller that keeps refusing (its view lags the election). Past the
// fallback delay, attempts alternate with the other controllers, and the one
// that leads now answers.
func TestForwardFallsBackFromARefusingLeader(t *testing.T) {
	stale := newFakeController(t, false, nil)
	active := newFakeController(t, true, nil)
	h := newHarness(t, func(c *Config) {
		c.ControllerAddrs = map[int32]string{3000: stale.addr, 3001: active.addr}
		// Fall back after 500 ms: long enough that, on a loaded machine, the
		// first attempt's dial to the refusing controller ends before the
		// attempt timeout copies the request to the other one (at 100 ms a
		// CI run saw the copy answered before the refusing one was reached).
		c.ControllerRequestTimeoutMs = 2000
	})
	h.runPublisher()
	active.attach(h.b.Listener(), h.next)
	h.b.Listener().HandleLeaderChange(quorum.LeaderAndEpoch{LeaderID: 3000, Epoch: 1, EpochStartOffset: -1})
	req := createOneTopic("fallback", 3000)
	start := time.Now()
	resp := h.request(req).(*kmsg.CreateTopicsResponse)
	took := time.Since(start)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || took > 2500*time.Millisecond {
		t.Fatalf("after %v: response %+v, want the active controller's success", took, resp.Topics)
	}
	stale.mu.Lock()
	refused := stale.requests[19]
	stale.mu.Unlock()
	if refused < 2 {
		t.Fatalf("the controller the quorum names saw %d CreateTopics, want it retried before the fallback", refused)
	}
}

// TestForwardRetriesAnActivatingLeaderAtOnce: the controller the quorum just
// elected refuses (NOT_CONTROLLER) until its first commit in the new epoch
// activates it, a few milliseconds. Each retry to it waits activatingBackoff,
// not the doubling backoff (20, 40, 80 ms) that made a CreateTopics forwarded
// during a failover reach the new controller up to 137 ms after its
// activation in a kraftd bench run.
func TestForwardRetriesAnActivatingLeaderAtOnce(t *testing.T) {
	standby := newFakeController(t, false, nil)
	elected := newFakeController(t, false, nil)
	refusals := 0
	elected.onCreate = func(*kmsg.CreateTopicsRequest) { // called with elected.mu held
		if refusals++; refusals > 4 {
			elected.active = true
		}
	}
	h := newHarness(t, func(c *Config) {
		c.ControllerAddrs = map[int32]string{3000: elected.addr, 3001: standby.addr}
		c.ControllerRequestTimeoutMs = 60_000 // no fallback to the standby within the test
	})
	var mu sync.Mutex
	var waits []time.Duration
	h.b.ch.onBackoff = func(d time.Duration) {
		mu.Lock()
		waits = append(waits, d)
		mu.Unlock()
	}
	h.runPublisher()
	elected.attach(h.b.Listener(), h.next)
	h.b.Listener().HandleLeaderChange(quorum.LeaderAndEpoch{LeaderID: 3000, Epoch: 2, EpochStartOffset: -1})
	req := createOneTopic("activating", 30_000)
	resp := h.request(req).(*kmsg.CreateTopicsResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("response %+v, want the elected controller's success", resp.Topics)
	}
	elected.mu.Lock()
	n := elected.requests[19]
	elected.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	if n != 5 || len(waits) != 4 {
		t.Fatalf("the elected controller saw %d CreateTopics (want 5), the broker waited %d times (want 4): %v", n, len(waits), waits)
	}
	for i, d := range waits {
		if d > activatingBackoff {
			t.Fatalf("wait %d after the quorum leader's refusal was %v, want at most %v: %v", i, d, activatingBackoff, waits)
		}
	}
}

// createOneTopic is a CreateTopics v7 of one topic (1 partition, replication
// factor 1) with the given timeout, as the forwarding tests send it.
func createOneTopic(topic string, timeoutMs int32) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(7)
	req.TimeoutMillis = timeoutMs
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, 1
	req.Topics = append(req.Topics, rt)
	return req
}
