package legacyzk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/metadata/records"
)

// Truth is the cluster as ZooKeeper (the source of truth in legacy mode)
// holds it.
type Truth struct {
	Brokers []int32
	Topics  map[string]TopicAssignment
	States  map[TopicPartition]LeaderIsr
}

// ReadTruth reads every broker id, topic assignment and partition state,
// pipelined with DefaultMaxInFlightRequests, without arming watches.
func ReadTruth(ctx context.Context, st Store) (*Truth, error) {
	kids, err := st.Children(ctx, BrokerIDsPath, false)
	if err != nil {
		return nil, err
	}
	tr := &Truth{Topics: map[string]TopicAssignment{}, States: map[TopicPartition]LeaderIsr{}}
	for _, k := range kids {
		if id, err := strconv.ParseInt(k, 10, 32); err == nil {
			tr.Brokers = append(tr.Brokers, int32(id))
		}
	}
	slices.Sort(tr.Brokers)
	names, err := st.Children(ctx, BrokerTopicsPath, false)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, n := range names {
		paths = append(paths, TopicPath(n))
	}
	var tps []TopicPartition
	for i, r := range getAll(ctx, st, paths, false, DefaultMaxInFlightRequests) {
		if r.err != nil {
			continue // deleted meanwhile
		}
		a, err := DecodeTopic(names[i], r.data)
		if err != nil {
			return nil, err
		}
		tr.Topics[names[i]] = a
		for _, p := range sortedPartitions(a.Partitions) {
			tps = append(tps, TopicPartition{names[i], p})
		}
	}
	paths = paths[:0]
	for _, tp := range tps {
		paths = append(paths, PartitionStatePath(tp.Topic, tp.Partition))
	}
	for i, r := range getAll(ctx, st, paths, false, DefaultMaxInFlightRequests) {
		if errors.Is(r.err, ErrNoNode) {
			continue
		}
		if r.err != nil {
			return nil, r.err
		}
		s, err := DecodeState(r.data, r.stat.Version)
		if err != nil {
			return nil, err
		}
		tr.States[tps[i]] = s
	}
	return tr, nil
}

// Diverge compares one broker's metadata cache with ZooKeeper and returns
// every difference as a sentence naming the broker ("broker 2: foo-0
// leader 1 epoch 3, ZooKeeper has leader 2 epoch 4"). Topics queued for
// deletion and partitions without a state znode yet are still compared:
// a broker that lists them differently is divergent.
func Diverge(ctx context.Context, st Store, brokerID int32, img *image.Image) ([]string, error) {
	tr, err := ReadTruth(ctx, st)
	if err != nil {
		return nil, err
	}
	return tr.Compare(brokerID, img), nil
}

// Compare is Diverge on an already-read Truth.
func (tr *Truth) Compare(brokerID int32, img *image.Image) []string {
	var out []string
	say := func(format string, args ...any) {
		out = append(out, fmt.Sprintf("broker %d: ", brokerID)+fmt.Sprintf(format, args...))
	}
	var cached []int32
	for _, b := range img.Brokers() {
		cached = append(cached, b.ID)
	}
	if !slices.Equal(cached, tr.Brokers) {
		say("live brokers %v, ZooKeeper has %v", cached, tr.Brokers)
	}
	for t := range img.Topics() {
		if _, ok := tr.Topics[t.Name()]; !ok {
			say("topic %s is cached but not in ZooKeeper", t.Name())
		}
	}
	for _, name := range slices.Sorted(maps.Keys(tr.Topics)) {
		tr.compareTopic(name, img, say)
	}
	return out
}

func (tr *Truth) compareTopic(name string, img *image.Image, say func(string, ...any)) {
	a := tr.Topics[name]
	t, ok := img.TopicByName(name)
	if !ok {
		say("topic %s is in ZooKeeper but not cached", name)
		return
	}
	if !a.ID.IsZero() && t.ID() != a.ID {
		say("topic %s id %s, ZooKeeper has %s", name, t.ID(), a.ID)
	}
	for _, p := range sortedPartitions(a.Partitions) {
		want, hasState := tr.States[TopicPartition{name, p}]
		got, cachedOK := t.Partition(p)
		switch {
		case !cachedOK && hasState:
			say("%s-%d is not cached", name, p)
		case !cachedOK:
		case !hasState:
			say("%s-%d is cached but has no state in ZooKeeper", name, p)
		case got.Leader != want.Leader || got.LeaderEpoch != want.LeaderEpoch ||
			got.PartitionEpoch != want.ZkVersion || !slices.Equal(got.ISR(), want.ISR):
			say("%s-%d leader %d epoch %d isr %v partitionEpoch %d, ZooKeeper has leader %d epoch %d isr %v zkVersion %d",
				name, p, got.Leader, got.LeaderEpoch, got.ISR(), got.PartitionEpoch,
				want.Leader, want.LeaderEpoch, want.ISR, want.ZkVersion)
		}
	}
	if t.NumPartitions() != len(a.Partitions) {
		say("topic %s has %d partitions cached, ZooKeeper has %d", name, t.NumPartitions(), len(a.Partitions))
	}
}

// CompareMetadata compares what broker brokerID answered to a Metadata
// request for all topics with ZooKeeper, for `kraftd check-divergence
// --bootstrap ...` in legacy mode: the broker set, topic ids and, per
// partition, leader, leader epoch, replicas and ISR (Metadata carries no
// partition epoch).
func (tr *Truth) CompareMetadata(brokerID int32, m *kmsg.MetadataResponse) []string {
	var out []string
	say := func(format string, args ...any) {
		out = append(out, fmt.Sprintf("broker %d: ", brokerID)+fmt.Sprintf(format, args...))
	}
	var ids []int32
	for _, b := range m.Brokers {
		ids = append(ids, b.NodeID)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, tr.Brokers) {
		say("live brokers %v, ZooKeeper has %v", ids, tr.Brokers)
	}
	seen := map[string]bool{}
	for _, t := range m.Topics {
		if t.Topic == nil || t.ErrorCode != 0 {
			continue
		}
		name := *t.Topic
		seen[name] = true
		a, ok := tr.Topics[name]
		if !ok {
			say("topic %s is served but not in ZooKeeper", name)
			continue
		}
		if !a.ID.IsZero() && records.UUID(t.TopicID) != a.ID && t.TopicID != [16]byte{} {
			say("topic %s id %s, ZooKeeper has %s", name, records.UUID(t.TopicID), a.ID)
		}
		for _, p := range t.Partitions {
			tr.comparePartition(name, p, say)
		}
		if len(t.Partitions) != len(a.Partitions) {
			say("topic %s has %d partitions served, ZooKeeper has %d", name, len(t.Partitions), len(a.Partitions))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(tr.Topics)) {
		if !seen[name] {
			say("topic %s is in ZooKeeper but not served", name)
		}
	}
	return out
}

func (tr *Truth) comparePartition(name string, p kmsg.MetadataResponseTopicPartition, say func(string, ...any)) {
	want, ok := tr.States[TopicPartition{name, p.Partition}]
	replicas := tr.Topics[name].Partitions[p.Partition]
	switch {
	case !ok:
		say("%s-%d is served but has no state in ZooKeeper", name, p.Partition)
	case p.Leader != want.Leader || (p.LeaderEpoch != -1 && p.LeaderEpoch != want.LeaderEpoch) ||
		!slices.Equal(p.ISR, want.ISR) || !slices.Equal(p.Replicas, replicas):
		say("%s-%d leader %d epoch %d isr %v replicas %v, ZooKeeper has leader %d epoch %d isr %v replicas %v",
			name, p.Partition, p.Leader, p.LeaderEpoch, p.ISR, p.Replicas, want.Leader, want.LeaderEpoch, want.ISR, replicas)
	}
}

// ControllerView is the active controller's in-memory partition states
// (Kafka's ControllerContext.partitionLeadershipInfo), to compare with
// ZooKeeper: the third divergence case is the two disagreeing.
type ControllerView struct {
	BrokerID        int32
	ControllerEpoch int32
	States          map[TopicPartition]LeaderIsr
}

// ControllerView returns this broker's controller state, ok=false when it
// is not the active controller. It runs on the controller's event loop.
func (b *Broker) ControllerView(ctx context.Context) (v ControllerView, ok bool, err error) {
	c := b.ctrl
	err = c.call(ctx, func() {
		if !c.active {
			return
		}
		ok = true
		v = ControllerView{BrokerID: c.id, ControllerEpoch: c.epoch, States: maps.Clone(c.view.States)}
	})
	return v, ok, err
}

// CompareController compares the controller's view with ZooKeeper: every
// partition state ZooKeeper holds must be in the view with the same
// leader, leader epoch, ISR and znode version, and the view must hold no
// state ZooKeeper lacks. Sentences start "controller N: ".
func (tr *Truth) CompareController(v ControllerView) []string {
	var out []string
	say := func(format string, args ...any) {
		out = append(out, fmt.Sprintf("controller %d: ", v.BrokerID)+fmt.Sprintf(format, args...))
	}
	tps := slices.SortedFunc(maps.Keys(tr.States), compareTP)
	for _, tp := range tps {
		want := tr.States[tp]
		got, ok := v.States[tp]
		switch {
		case !ok:
			say("%s-%d has no state in the controller, ZooKeeper has leader %d epoch %d isr %v zkVersion %d",
				tp.Topic, tp.Partition, want.Leader, want.LeaderEpoch, want.ISR, want.ZkVersion)
		case got.Leader != want.Leader || got.LeaderEpoch != want.LeaderEpoch || got.ZkVersion != want.ZkVersion ||
			!slices.Equal(got.ISR, want.ISR):
			say("%s-%d leader %d epoch %d isr %v zkVersion %d, ZooKeeper has leader %d epoch %d isr %v zkVersion %d",
				tp.Topic, tp.Partition, got.Leader, got.LeaderEpoch, got.ISR, got.ZkVersion,
				want.Leader, want.LeaderEpoch, want.ISR, want.ZkVersion)
		}
	}
	for _, tp := range slices.SortedFunc(maps.Keys(v.States), compareTP) {
		if _, ok := tr.States[tp]; !ok {
			say("%s-%d has a state in the controller but none in ZooKeeper", tp.Topic, tp.Partition)
		}
	}
	return out
}

type viewJSON struct {
	BrokerID        int32           `json:"broker_id"`
	ControllerEpoch int32           `json:"controller_epoch"`
	Partitions      []viewPartition `json:"partitions"`
}

type viewPartition struct {
	Topic       string  `json:"topic"`
	Partition   int32   `json:"partition"`
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leader_epoch"`
	ISR         []int32 `json:"isr"`
	ZkVersion   int32   `json:"zk_version"`
}

// MarshalJSON is the view as the admin endpoint serves it (GET
// /controller/view), partitions sorted.
func (v ControllerView) MarshalJSON() ([]byte, error) {
	j := viewJSON{BrokerID: v.BrokerID, ControllerEpoch: v.ControllerEpoch, Partitions: []viewPartition{}}
	for _, tp := range slices.SortedFunc(maps.Keys(v.States), compareTP) {
		s := v.States[tp]
		j.Partitions = append(j.Partitions, viewPartition{tp.Topic, tp.Partition, s.Leader, s.LeaderEpoch, s.ISR, s.ZkVersion})
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (v *ControllerView) UnmarshalJSON(b []byte) error {
	var j viewJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	v.BrokerID, v.ControllerEpoch = j.BrokerID, j.ControllerEpoch
	v.States = make(map[TopicPartition]LeaderIsr, len(j.Partitions))
	for _, p := range j.Partitions {
		v.States[TopicPartition{p.Topic, p.Partition}] = LeaderIsr{Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, ISR: p.ISR,
			ControllerEpoch: j.ControllerEpoch, ZkVersion: p.ZkVersion}
	}
	return nil
}
