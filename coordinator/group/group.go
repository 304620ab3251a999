package group

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// State is a classic group's state (Kafka's GroupState).
type State int8

const (
	// Empty: no members; offsets may still be committed (generation -1).
	Empty State = iota
	// PreparingRebalance: members are (re)joining; JoinGroup answers wait.
	PreparingRebalance
	// CompletingRebalance: joins are answered; the leader's SyncGroup
	// assignment is awaited.
	CompletingRebalance
	// Stable: the assignment is persisted and handed out.
	Stable
	// Dead: the group is gone (deleted, or its partition moved away).
	Dead
)

func (s State) String() string {
	switch s {
	case Empty:
		return "Empty"
	case PreparingRebalance:
		return "PreparingRebalance"
	case CompletingRebalance:
		return "CompletingRebalance"
	case Stable:
		return "Stable"
	case Dead:
		return "Dead"
	}
	return "Unknown"
}

// TopicPartition names a committed offset's partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// committedOffset is one partition's committed offset (OffsetCommitValue).
type committedOffset struct {
	offset      int64
	leaderEpoch int32
	metadata    string
	commitMs    int64
	// logOffset is where its record is in __consumer_offsets: a
	// transaction's offset replaces a committed one only if written after
	// it (Kafka's completePendingTxnOffsetCommit).
	logOffset int64
}

type protocol struct {
	name     string
	metadata []byte
}

// member is one member of a classic group.
//
// INVARIANTS: joinWait != nil only while the group is PreparingRebalance;
// syncWait != nil only while it is CompletingRebalance.
type member struct {
	id                 string
	instanceID         *string // group.instance.id (KIP-345), nil for a dynamic member
	clientID           string
	clientHost         string
	sessionTimeoutMs   int32
	rebalanceTimeoutMs int32
	protocolType       string
	protocols          []protocol
	assignment         []byte

	joinWait          chan *kmsg.JoinGroupResponse // buffered 1; the member's parked JoinGroup
	joinVersion       int16
	syncWait          chan syncAnswer // buffered 1; the member's parked SyncGroup
	heartbeatDeadline int64           // ms; the session ends past it
}

type syncAnswer struct {
	code       int16
	assignment []byte
}

func (m *member) metadataFor(name string) []byte {
	for _, p := range m.protocols {
		if p.name == name {
			return p.metadata
		}
	}
	return nil
}

func (m *member) sameProtocols(ps []protocol) bool {
	return slices.EqualFunc(m.protocols, ps, func(a, b protocol) bool {
		return a.name == b.name && string(a.metadata) == string(b.metadata)
	})
}

// group is one classic group and its committed offsets.
//
// INVARIANTS: leader is "" or a key of members; every static member's
// instance id maps to its member id in static; pending members are not in
// members; generation only grows; members is empty in Empty and Dead.
type group struct {
	id           string
	partition    int32
	state        State
	stateSinceMs int64
	protocolType string
	protocol     string
	generation   int32
	leader       string
	members      map[string]*member
	static       map[string]string // group.instance.id -> member id
	pending      map[string]int64  // KIP-394 member ids handed out, -> deadline ms
	pendingSync  map[string]bool   // members not synced since the join completed
	syncDeadline int64             // ms; members in pendingSync are removed past it
	joinDeadline int64             // ms; the join phase completes at the latest then
	// initialDelay bookkeeping (group.initial.rebalance.delay.ms): the
	// first rebalance of an Empty group waits delayMs at a time while new
	// members keep arriving, at most until the rebalance timeout.
	initialDelay     bool
	initialRemaining int64
	newMemberJoined  bool

	offsets map[TopicPartition]committedOffset
	// pendingTxn are TxnOffsetCommit's offsets by producer id, in the log
	// but not yet committed: the producer's COMMIT marker moves them into
	// offsets, its ABORT drops them.
	pendingTxn map[int64]map[TopicPartition]committedOffset
}

// hasPending reports whether tp has a transactional offset awaiting its
// marker (OffsetFetch RequireStable's UNSTABLE_OFFSET_COMMIT).
func (g *group) hasPending(tp TopicPartition) bool {
	for _, offs := range g.pendingTxn {
		if _, ok := offs[tp]; ok {
			return true
		}
	}
	return false
}

// completeTxn applies producer pid's marker at markerOffset: COMMIT moves
// its pending offsets written before the marker into offsets (unless a
// later commit replaced them), ABORT drops them. Pending offsets written
// after the marker belong to a later transaction and stay.
func (g *group) completeTxn(pid int64, commit bool, markerOffset int64) {
	offs, ok := g.pendingTxn[pid]
	if !ok {
		return
	}
	for tp, o := range offs {
		if o.logOffset >= markerOffset {
			continue
		}
		delete(offs, tp)
		if cur, ok := g.offsets[tp]; commit && (!ok || cur.logOffset < o.logOffset) {
			g.offsets[tp] = o
		}
	}
	if len(offs) == 0 {
		delete(g.pendingTxn, pid)
	}
}

func (g *group) addPending(pid int64, tp TopicPartition, o committedOffset) {
	if g.pendingTxn[pid] == nil {
		g.pendingTxn[pid] = map[TopicPartition]committedOffset{}
	}
	g.pendingTxn[pid][tp] = o
}

func newGroup(id string, partition int32, nowMs int64) *group {
	return &group{id: id, partition: partition, state: Empty, stateSinceMs: nowMs,
		members: map[string]*member{}, static: map[string]string{}, pending: map[string]int64{},
		pendingSync: map[string]bool{}, offsets: map[TopicPartition]committedOffset{},
		pendingTxn: map[int64]map[TopicPartition]committedOffset{}}
}

func (g *group) transition(s State, nowMs int64) {
	g.state, g.stateSinceMs = s, nowMs
}

// memberIDs is the members' ids in a stable order.
func (g *group) memberIDs() []string {
	ids := make([]string, 0, len(g.members))
	for id := range g.members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// supportsProtocols is Kafka's GroupMetadata.supportsProtocols: an empty
// group takes any non-empty protocol type; otherwise the type must match and
// one of the offered protocols must be supported by every member.
func (g *group) supportsProtocols(protocolType string, ps []protocol) bool {
	if len(g.members) == 0 {
		return protocolType != "" && len(ps) > 0
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, p := range ps {
		all := true
		for _, m := range g.members {
			if !slices.ContainsFunc(m.protocols, func(q protocol) bool { return q.name == p.name }) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// selectProtocol is Kafka's vote: the candidate protocols are those every
// member supports; each member votes for its first preference among them;
// the most votes win (ties: the earliest in the first member's order).
func (g *group) selectProtocol() string {
	ids := g.memberIDs()
	if len(ids) == 0 {
		return ""
	}
	var candidates []string
	for _, p := range g.members[ids[0]].protocols {
		ok := true
		for _, id := range ids[1:] {
			if !slices.ContainsFunc(g.members[id].protocols, func(q protocol) bool { return q.name == p.name }) {
				ok = false
				break
			}
		}
		if ok {
			candidates = append(candidates, p.name)
		}
	}
	votes := map[string]int{}
	for _, id := range ids {
		for _, p := range g.members[id].protocols {
			if slices.Contains(candidates, p.name) {
				votes[p.name]++
				break
			}
		}
	}
	best := ""
	for _, c := range candidates {
		if best == "" || votes[c] > votes[best] {
			best = c
		}
	}
	return best
}

// allJoined: every member is waiting in JoinGroup and no KIP-394 member id
// is still outstanding (Kafka's hasAllMembersJoined).
func (g *group) allJoined() bool {
	for _, m := range g.members {
		if m.joinWait == nil {
			return false
		}
	}
	return len(g.pending) == 0
}

// maxRebalanceTimeoutMs is the longest rebalance timeout of the members.
func (g *group) maxRebalanceTimeoutMs() int64 {
	var t int32
	for _, m := range g.members {
		t = max(t, m.rebalanceTimeoutMs)
	}
	return int64(t)
}

// isStaticFenced: instanceID belongs to a different member id (KIP-345's
// FENCED_INSTANCE_ID).
func (g *group) isStaticFenced(instanceID *string, memberID string) bool {
	if instanceID == nil {
		return false
	}
	id, ok := g.static[*instanceID]
	return ok && id != memberID
}

// subscribedTopics is the topics the members subscribe to under the
// consumer protocol; ok is false when they cannot be known (another
// protocol type, or unreadable metadata).
func (g *group) subscribedTopics() (map[string]bool, bool) {
	if g.protocolType != "consumer" {
		return nil, false
	}
	out := map[string]bool{}
	for _, m := range g.members {
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(m.metadataFor(g.protocol)); err != nil {
			return nil, false
		}
		for _, t := range meta.Topics {
			out[t] = true
		}
	}
	return out, true
}
