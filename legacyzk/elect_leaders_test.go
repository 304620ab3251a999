package legacyzk

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
)

// electReq is an ElectLeaders v2 of typ for topics (nil: a null topic
// list), given as topic -> partitions.
func electReq(typ int8, topics map[string][]int32) *kmsg.ElectLeadersRequest {
	req := kmsg.NewPtrElectLeadersRequest()
	req.Version, req.ElectionType, req.TimeoutMillis = 2, typ, 5000
	if topics == nil {
		return req
	}
	req.Topics = []kmsg.ElectLeadersRequestTopic{}
	for _, t := range slices.Sorted(func(yield func(string) bool) {
		for k := range topics {
			if !yield(k) {
				return
			}
		}
	}) {
		req.Topics = append(req.Topics, kmsg.ElectLeadersRequestTopic{Topic: t, Partitions: topics[t]})
	}
	return req
}

// electCodes runs req on b and returns "topic-p" -> error code.
func electCodes(t *testing.T, b *Broker, req *kmsg.ElectLeadersRequest) (map[string]int16, *kmsg.ElectLeadersResponse) {
	t.Helper()
	resp, err := b.ElectLeaders(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int16{}
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			k := fmt.Sprintf("%s-%d", rt.Topic, p.Partition)
			if _, dup := out[k]; dup {
				t.Fatalf("%s answered twice: %+v", k, resp)
			}
			out[k] = p.ErrorCode
		}
	}
	return out, resp
}

func wantCodes(t *testing.T, what string, got, want map[string]int16) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %v want %v", what, got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s: got %v want %v", what, got, want)
		}
	}
}

// ElectLeaders on the ZooKeeper-era controller (Kafka 3.3's
// ReplicaLeaderElection): preferred-replica election after a broker came
// back moves leadership to it with one fenced write and a push, answered
// once the receiving broker's cache shows it; each error code; unclean
// election of an out-of-sync replica when no in-sync one is live.
func TestMemElectLeaders(t *testing.T) { electLeaders(t, newMemCluster(t, 1, 2, 3)) }

// TestElectLeadersZk runs it on a real ZooKeeper.
func TestElectLeadersZk(t *testing.T) { electLeaders(t, newZkCluster(t, 1, 2, 3)) }

func electLeaders(t *testing.T, c *cluster) {
	ctrl := c.controller()
	c.converged()
	var others []int32
	for _, id := range []int32{1, 2, 3} {
		if id != ctrl.ID() {
			others = append(others, id)
		}
	}
	a, b := others[0], others[1]
	createManual(t, ctrl, "t", map[int32][]int32{0: {a, b, ctrl.ID()}}, nil)
	c.converged()

	got, _ := electCodes(t, ctrl, electReq(0, map[string][]int32{"t": {0, 0, 5}, "nope": {0}}))
	wantCodes(t, "all led by their preferred replica", got, map[string]int16{
		"t-0": kerr.ElectionNotNeeded.Code, "t-5": kerr.UnknownTopicOrPartition.Code, "nope-0": kerr.UnknownTopicOrPartition.Code})
	got, _ = electCodes(t, c.brokers[a], electReq(0, map[string][]int32{"t": {0}}))
	wantCodes(t, "sent to a broker that is not the controller", got, map[string]int16{"t-0": kerr.NotController.Code})
	_, bad := electCodes(t, ctrl, electReq(7, map[string][]int32{"t": {0}}))
	if bad.ErrorCode != kerr.InvalidRequest.Code || bad.Topics[0].Partitions[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("unknown election type: %+v", bad)
	}
	huge := electReq(0, map[string][]int32{"t": make([]int32, ctrl.cfg.MaxRecordsPerUserOp+1)})
	if _, r := electCodes(t, ctrl, huge); r.ErrorCode != kerr.PolicyViolation.Code || len(r.Topics) != 0 {
		t.Fatalf("over-cap request: error %d, %d topics", r.ErrorCode, len(r.Topics))
	}

	// a shuts down (leadership moves to b, a leaves the ISR) and comes back.
	if err := c.brokers[a].Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.start(a)
	c.converged()
	if s := readState(t, c.admin, "t", 0); s.Leader != b || slices.Contains(s.ISR, a) {
		t.Fatalf("after the shutdown: %+v", s)
	}
	got, _ = electCodes(t, ctrl, electReq(0, map[string][]int32{"t": {0}}))
	wantCodes(t, "preferred replica out of the ISR", got, map[string]int16{"t-0": kerr.PreferredLeaderNotAvailable.Code})

	// The leader takes a back into the ISR; a null topic list now elects
	// a and reports only t-0.
	cl := protocol.NewClient(protocol.ClientConfig{ClientID: "test"})
	defer cl.Close()
	cur := readState(t, c.admin, "t", 0)
	isr := append(slices.Clone(cur.ISR), a)
	if r := sendAlter(t, cl, ctrl, alterReq(c.brokers[b], "t", b, c.brokers[b].BrokerEpoch(), cur.LeaderEpoch, cur.ZkVersion, isr...)); partitionCode(r) != 0 {
		t.Fatalf("AlterPartition %+v", r)
	}
	cur = readState(t, c.admin, "t", 0)
	got, _ = electCodes(t, ctrl, electReq(0, nil))
	wantCodes(t, "null topic list", got, map[string]int16{"t-0": 0})
	s := readState(t, c.admin, "t", 0)
	if s.Leader != a || s.LeaderEpoch != cur.LeaderEpoch+1 || !slices.Equal(s.ISR, isr) || s.ZkVersion != cur.ZkVersion+1 {
		t.Fatalf("znode after the election %+v (before %+v)", s, cur)
	}
	if p, _ := ctrl.Image().Partition(mustTopicID(t, ctrl, "t"), 0); p.Leader != a {
		t.Fatalf("the answer came before the controller's cache named %d: %v", a, p)
	}
	waitFor(t, 5*time.Second, "the new leader pushed to every broker", func() (bool, string) {
		for _, br := range c.liveBrokers() {
			if p, _ := br.Image().Partition(mustTopicID(t, br, "t"), 0); p.Leader != a {
				return false, fmt.Sprintf("broker %d: %v", br.ID(), p)
			}
		}
		return true, ""
	})

	// Unclean: u-0 on {a, b} with ISR {a}, d-0 only on a; a is lost.
	createManual(t, ctrl, "u", map[int32][]int32{0: {a, b}}, nil)
	createManual(t, ctrl, "d", map[int32][]int32{0: {a}}, nil)
	c.converged()
	cur = readState(t, c.admin, "u", 0)
	if r := sendAlter(t, cl, ctrl, alterReq(c.brokers[a], "u", a, c.brokers[a].BrokerEpoch(), cur.LeaderEpoch, cur.ZkVersion, a)); partitionCode(r) != 0 {
		t.Fatalf("AlterPartition %+v", r)
	}
	c.brokers[a].Close()
	waitFor(t, 5*time.Second, "u-0 and d-0 leaderless", func() (bool, string) {
		u, d := readState(t, c.admin, "u", 0), readState(t, c.admin, "d", 0)
		return u.Leader == NoLeader && d.Leader == NoLeader, fmt.Sprintf("u %+v d %+v", u, d)
	})
	got, _ = electCodes(t, ctrl, electReq(0, map[string][]int32{"u": {0}}))
	wantCodes(t, "preferred replica gone", got, map[string]int16{"u-0": kerr.PreferredLeaderNotAvailable.Code})
	got, _ = electCodes(t, ctrl, electReq(1, map[string][]int32{"u": {0}, "d": {0}, "t": {0}}))
	wantCodes(t, "unclean", got, map[string]int16{
		"u-0": 0, "d-0": kerr.EligibleLeadersNotAvailable.Code, "t-0": kerr.ElectionNotNeeded.Code})
	if s := readState(t, c.admin, "u", 0); s.Leader != b || !slices.Equal(s.ISR, []int32{b}) || s.RecoveryState != 1 {
		t.Fatalf("u-0 after the unclean election: %+v", s)
	}
}

func mustTopicID(t *testing.T, b *Broker, name string) [16]byte {
	t.Helper()
	tp, ok := b.Image().TopicByName(name)
	if !ok {
		t.Fatalf("broker %d does not know %s", b.ID(), name)
	}
	return tp.ID()
}

// The pure election rules: PREFERRED only ever elects the first replica,
// keeping the ISR and recovery state; UNCLEAN prefers a live ISR member
// (keeping the recovery state) and only then takes the first live replica
// alone, RECOVERING.
func TestElectPreferredAndUnclean(t *testing.T) {
	live := func(ids ...int32) func(int32) bool { return func(b int32) bool { return slices.Contains(ids, b) } }
	cur := LeaderIsr{Leader: 2, LeaderEpoch: 4, ISR: []int32{2, 3}, ControllerEpoch: 1, ZkVersion: 9}
	for _, tc := range []struct {
		name     string
		replicas []int32
		cur      LeaderIsr
		eligible func(int32) bool
		unclean  bool
		ok       bool
		want     LeaderIsr
	}{
		{"preferred out of the ISR", []int32{1, 2, 3}, cur, live(1, 2, 3), false, false, cur},
		{"preferred not live", []int32{3, 2, 1}, cur, live(1, 2), false, false, cur},
		{"preferred back", []int32{3, 2, 1}, cur, live(1, 2, 3), false, true,
			LeaderIsr{Leader: 3, LeaderEpoch: 5, ISR: []int32{2, 3}, ControllerEpoch: 7, ZkVersion: 9}},
		{"unclean, a live ISR member", []int32{1, 3}, LeaderIsr{Leader: -1, LeaderEpoch: 4, ISR: []int32{3}, RecoveryState: 1, ZkVersion: 9},
			live(1, 3), true, true, LeaderIsr{Leader: 3, LeaderEpoch: 5, ISR: []int32{3}, ControllerEpoch: 7, RecoveryState: 1, ZkVersion: 9}},
		{"unclean, out of sync", []int32{1, 3}, LeaderIsr{Leader: -1, LeaderEpoch: 4, ISR: []int32{3}, ZkVersion: 9},
			live(1), true, true, LeaderIsr{Leader: 1, LeaderEpoch: 5, ISR: []int32{1}, ControllerEpoch: 7, RecoveryState: 1, ZkVersion: 9}},
		{"unclean, nobody live", []int32{1, 3}, LeaderIsr{Leader: -1, LeaderEpoch: 4, ISR: []int32{3}, ZkVersion: 9},
			live(), true, false, LeaderIsr{Leader: -1, LeaderEpoch: 4, ISR: []int32{3}, ZkVersion: 9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r electionResult
			if tc.unclean {
				r = electUnclean(tc.replicas, tc.cur, tc.eligible, 7)
			} else {
				r = electPreferred(tc.replicas, tc.cur, tc.eligible, 7)
			}
			if r.ok != tc.ok || (tc.ok && (r.state.Leader != tc.want.Leader || r.state.LeaderEpoch != tc.want.LeaderEpoch ||
				!slices.Equal(r.state.ISR, tc.want.ISR) || r.state.ControllerEpoch != tc.want.ControllerEpoch ||
				r.state.RecoveryState != tc.want.RecoveryState || r.state.ZkVersion != tc.want.ZkVersion)) {
				t.Fatalf("got %+v ok=%v, want %+v ok=%v", r.state, r.ok, tc.want, tc.ok)
			}
		})
	}
}
