package quorum

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/quorum/raftlog"
)

// sentTo records where a test node's driver sends its requests.
type sentTo struct {
	nowMs int64
	reqs  []string // the addresses of its Fetches
	votes []Message
}

func (h *sentTo) NowMs() int64   { return h.nowMs }
func (h *sentTo) Now() time.Time { return time.UnixMilli(h.nowMs) }
func (h *sentTo) SendRequest(m Message, to int32, addr string, _ int64) {
	if m.Fetch != nil {
		h.reqs = append(h.reqs, addr)
	}
	if m.Vote != nil {
		h.votes = append(h.votes, m)
	}
}
func (h *sentTo) Reply(Message)                         {}
func (h *sentTo) StartFlush(func() error)               {}
func (h *sentTo) WaitFlush() error                      { return nil }
func (h *sentTo) StartRecord(func() error, func(error)) {}
func (h *sentTo) StartSnapshotWrite(func(func(int) error) error, func(error), func()) {
}

// TestFollowerLearnsLeaderAddressFromBeginQuorumEpoch: a voter of a static quorum
// upgraded to kraft.version 1 whose log's voter set does not include the leader (a
// controller added after the last VotersRecord it holds) and whose
// controller.quorum.voters does not list it has no address for that leader but the
// one BeginQuorumEpoch v1 carries (LeaderEndpoints, KIP-853). The driver now learns
// it, as Kafka's followers take it from the request; before, its Fetches went to ""
// and failed forever (the Node simulation with voter changes found a voter stuck at
// its log end for 30 s after healing). A BeginQuorumEpoch the core refuses teaches
// nothing.
func TestFollowerLearnsLeaderAddressFromBeginQuorumEpoch(t *testing.T) {
	store := raftlog.NewMemStorage()
	b := raftlog.EncodeBatch(0, 1, 1_700_000_000_000, true, KRaftControlRecords(KRaftVersionDynamic, dynVoters(t, 1, 2)))
	if err := store.Append([]raftlog.Batch{b}); err != nil {
		t.Fatal(err)
	}
	if err := store.Sync(); err != nil {
		t.Fatal(err)
	}
	h := &sentTo{nowMs: 1_700_000_001_000}
	n, err := newNode(NodeConfig{Raft: Config{NodeID: 2, Voters: []int32{1}, DirectoryID: testDirID(2)}, Storage: store,
		VoterAddrs: map[int32]string{1: "127.0.0.1:1"}, ListenerName: "CONTROLLER"}, h)
	if err != nil {
		t.Fatal(err)
	}
	n.begin()
	n.settle()
	begin := func(epoch int32, host string) {
		t.Helper()
		req := kmsg.NewPtrBeginQuorumEpochRequest()
		req.Version, req.VoterID = 1, 2
		p := kmsg.NewBeginQuorumEpochRequestTopicPartition()
		p.LeaderID, p.LeaderEpoch, p.VoterDirectoryID = 3, epoch, testDirID(2)
		tp := kmsg.NewBeginQuorumEpochRequestTopic()
		tp.Topic, tp.Partitions = MetadataTopic, []kmsg.BeginQuorumEpochRequestTopicPartition{p}
		req.Topics = []kmsg.BeginQuorumEpochRequestTopic{tp}
		req.LeaderEndpoints = []kmsg.BeginQuorumEpochRequestLeaderEndpoint{{Name: "CONTROLLER", Host: host, Port: 9093}}
		m, _, early, err := n.decodeRPC(req)
		if err != nil || early != nil {
			t.Fatalf("decode: %v %v", err, early)
		}
		m.To = 2
		h.reqs = nil
		n.onRequest(m)
		n.settle()
	}
	begin(2, "10.0.0.3")
	if st := n.raft.Status(); st.LeaderID != 3 || st.Epoch != 2 {
		t.Fatalf("setup: leader %d epoch %d", st.LeaderID, st.Epoch)
	}
	if len(h.reqs) != 1 || h.reqs[0] != "10.0.0.3:9093" {
		t.Fatalf("fetches after BeginQuorumEpoch from leader 3 went to %q, want 10.0.0.3:9093", h.reqs)
	}
	begin(1, "10.6.6.6") // an older epoch: refused
	if got := n.addrOf(3); got != "10.0.0.3:9093" {
		t.Fatalf("a refused BeginQuorumEpoch moved leader 3 to %q", got)
	}
}

// TestVoterLearnsLeaderAddressFromVoteResponse: a replica that thinks itself a voter
// (its log stops before its removal) and whose log's voter set does not include the
// leader gets no BeginQuorumEpoch from it; its pre-vote is refused by a voter that
// names the leader and, from Vote v1, its endpoint (NodeEndpoints, KIP-853). The
// driver now learns it and fetches from the leader, where it reads its removal;
// before, it fetched from "" forever (the Node simulation with voter changes found a
// removed voter stuck at its log end for 30 s after healing).
func TestVoterLearnsLeaderAddressFromVoteResponse(t *testing.T) {
	store := raftlog.NewMemStorage()
	b := raftlog.EncodeBatch(0, 1, 1_700_000_000_000, true, KRaftControlRecords(KRaftVersionDynamic, dynVoters(t, 1, 2)))
	if err := store.Append([]raftlog.Batch{b}); err != nil {
		t.Fatal(err)
	}
	if err := store.Sync(); err != nil {
		t.Fatal(err)
	}
	h := &sentTo{nowMs: 1_700_000_001_000}
	n, err := newNode(NodeConfig{Raft: Config{NodeID: 2, Voters: []int32{1}, DirectoryID: testDirID(2)}, Storage: store,
		VoterAddrs: map[int32]string{1: "127.0.0.1:1"}, ListenerName: "CONTROLLER"}, h)
	if err != nil {
		t.Fatal(err)
	}
	n.begin()
	n.settle()
	h.nowMs += 10_000 // past the election timeout: it pre-votes
	n.onTick()
	n.settle()
	if len(h.votes) != 1 || !h.votes[0].Vote.PreVote {
		t.Fatalf("setup: sent %v, want one pre-vote", h.votes)
	}
	req := h.votes[0]
	kresp := kmsg.NewPtrVoteResponse()
	kresp.Version = 2
	p := kmsg.NewVoteResponseTopicPartition()
	p.LeaderID, p.LeaderEpoch = 3, req.Vote.CandidateEpoch
	tp := kmsg.NewVoteResponseTopic()
	tp.Topic, tp.Partitions = MetadataTopic, []kmsg.VoteResponseTopicPartition{p}
	kresp.Topics = []kmsg.VoteResponseTopic{tp}
	kresp.NodeEndpoints = []kmsg.VoteResponseNodeEndpoint{{NodeID: 3, Host: "10.0.0.3", Port: 9093}}
	resp, err := decodeResponse(req, kresp)
	if err != nil {
		t.Fatal(err)
	}
	resp.From, resp.To, resp.RequestID = req.To, req.From, req.RequestID
	h.reqs = nil
	n.onResponse(resp)
	n.settle()
	if st := n.raft.Status(); st.LeaderID != 3 {
		t.Fatalf("setup: follows %d after the refusal naming leader 3", st.LeaderID)
	}
	if len(h.reqs) != 1 || h.reqs[0] != "10.0.0.3:9093" {
		t.Fatalf("fetches after the pre-vote refusal naming leader 3 went to %q, want 10.0.0.3:9093", h.reqs)
	}
}
