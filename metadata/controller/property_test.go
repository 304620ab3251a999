package controller

import (
	"fmt"
	"iter"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"pgregory.net/rapid"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/metadata/records"
	"github.com/kraftd/kraftd/quorum"
)

// Without racks, every round of as many partitions as unfenced brokers
// gives each unfenced broker exactly one leadership, and replicas within a
// partition are distinct.
func TestPlacementSpreadsLeaders(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 12).Draw(t, "brokers")
		fenced := rapid.IntRange(0, 3).Draw(t, "fenced")
		rf := rapid.IntRange(1, n+fenced).Draw(t, "rf")
		rounds := rapid.IntRange(1, 5).Draw(t, "rounds")
		var brokers []usableBroker
		for i := range n + fenced {
			brokers = append(brokers, usableBroker{id: int32(i), fenced: i >= n})
		}
		rng := rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "seed"), 1))
		p := newStripedPlacer(rng, brokers)
		if err := p.check(rf); err != nil {
			t.Fatal(err)
		}
		out := p.place(n*rounds, rf)
		leads := map[int32]int{}
		for _, r := range out {
			if len(r) != rf || len(slices.Compact(slices.Sorted(slices.Values(r)))) != rf {
				t.Fatalf("bad replicas %v", r)
			}
			leads[r[0]]++
		}
		for id := range int32(n) {
			if leads[id] != rounds {
				t.Fatalf("broker %d leads %d of %d partitions, want %d (%v)", id, leads[id], n*rounds, rounds, leads)
			}
		}
	})
}

// With racks, each partition spans as many racks as it can.
func TestPlacementRackAware(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		racks := rapid.IntRange(1, 4).Draw(t, "racks")
		per := rapid.IntRange(1, 3).Draw(t, "perRack")
		rf := rapid.IntRange(1, racks*per).Draw(t, "rf")
		var brokers []usableBroker
		rackOf := map[int32]string{}
		for i := range racks * per {
			r := fmt.Sprintf("r%d", i%racks)
			brokers = append(brokers, usableBroker{id: int32(i), rack: &r})
			rackOf[int32(i)] = r
		}
		rng := rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "seed"), 2))
		p := newStripedPlacer(rng, brokers)
		if err := p.check(rf); err != nil {
			t.Fatal(err)
		}
		out := p.place(20, rf)
		for _, r := range out {
			seen := map[string]bool{}
			for _, id := range r {
				seen[rackOf[id]] = true
			}
			if len(seen) != min(rf, racks) {
				t.Fatalf("replicas %v span %d racks, want %d", r, len(seen), min(rf, racks))
			}
		}
	})
}

// partitionChange against the rules written out naively.
func TestPartitionChangeRules(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		replicas := rapid.SliceOfNDistinct(rapid.Int32Range(0, 6), 1, 5, rapid.ID).Draw(t, "replicas")
		isr := subset(t, "isr", replicas, 1)
		leader := rapid.SampledFrom(append(slices.Clone(isr), -1)).Draw(t, "leader")
		target := subset(t, "target", isr, 0)
		okSet := subset(t, "acceptable", replicas, 0)
		acceptable := func(r int32) bool { return slices.Contains(okSet, r) }
		p := partitionOf(t, replicas, isr, leader)
		unclean := rapid.Bool().Draw(t, "unclean")
		rec := partitionChange([16]byte{1}, 0, p, target, acceptable, unclean, 14)

		wantISR := isr
		if len(target) > 0 {
			wantISR = target
		}
		wantLeader := int32(-1)
		if slices.Contains(target, leader) && acceptable(leader) {
			wantLeader = leader
		} else {
			for _, r := range replicas {
				if slices.Contains(target, r) && acceptable(r) {
					wantLeader = r
					break
				}
			}
		}
		// Unclean: no clean leader, so the first acceptable replica leads
		// alone and RECOVERING (unless it already leads).
		wantRecovery := records.NoLeaderRecoveryStateChange
		if wantLeader == -1 && unclean {
			for _, r := range replicas {
				if acceptable(r) {
					wantLeader = r
					if r != leader {
						wantISR, wantRecovery = []int32{r}, image.LeaderRecovering
					}
					break
				}
			}
		}
		if rec != nil && rec.LeaderRecoveryState != wantRecovery {
			t.Fatalf("leader recovery state %d, want %d", rec.LeaderRecoveryState, wantRecovery)
		}
		gotLeader, gotISR := leader, isr
		if rec != nil {
			if rec.Leader != -2 {
				gotLeader = rec.Leader
			}
			if rec.ISR != nil {
				gotISR = rec.ISR
			}
		}
		if gotLeader != wantLeader || !slices.Equal(gotISR, wantISR) {
			t.Fatalf("leader %d isr %v -> %d %v, want %d %v", leader, isr, gotLeader, gotISR, wantLeader, wantISR)
		}
		if (rec == nil) != (wantLeader == leader && slices.Equal(wantISR, isr)) {
			t.Fatalf("record %+v for a change that is (not) a no-op", rec)
		}
	})
}

func subset(t *rapid.T, label string, from []int32, minLen int) []int32 {
	var out []int32
	for _, r := range from {
		if rapid.Bool().Draw(t, fmt.Sprintf("%s-%d", label, r)) {
			out = append(out, r)
		}
	}
	if len(out) < minLen {
		out = append(out, from[0])
	}
	return out
}

// partitionOf builds an image partition by replaying a PartitionRecord.
func partitionOf(t *rapid.T, replicas, isr []int32, leader int32) image.Partition {
	v := emptyView()
	recs := []offsetRecord{
		{0, topicRecord("t")},
		{1, partitionRec(replicas, isr, leader)},
	}
	next, err := v.replay(seqOf(recs), 1)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := next.img.Partition([16]byte{1}, 0)
	return p
}

// Random operations on an active controller, with leadership changes and
// partial commits: after every step the controller's committed image must
// equal a fresh replay of the committed log, pass PartitionSanity, and
// keep leaders on active brokers.
func TestRandomOperationsReplayEquality(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		fl := &fakeLog{leaderEpoch: -1}
		cfg := Config{NodeID: 1, ClusterID: testClusterID, Quorum: nopQuorum{}, MaxIdleIntervalMs: 100,
			MaxRecordsPerBatch: 4, Rand: rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "seed"), 3))}
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		c := newCore(cfg, fl.propose)
		epoch, nowMs := int32(0), int64(0)
		lead := func() {
			epoch++
			fl.leaderEpoch = epoch
			start := fl.appendLeaderChange(1, epoch)
			c.leaderChange(quorum.LeaderAndEpoch{LeaderID: 1, Epoch: epoch, EpochStartOffset: start}, nowMs)
			commitAll(t, c, fl) // LeaderChange and activation records
		}
		lead()
		prev := c.committed.visible()
		steps := rapid.IntRange(10, 50).Draw(t, "steps")
		for range steps {
			id := rapid.Int32Range(1, 4).Draw(t, "broker")
			switch rapid.IntRange(0, 9).Draw(t, "op") {
			case 0:
				reg := registration(id)
				reg.IncarnationID[15] = byte(rapid.IntRange(0, 2).Draw(t, "incarnation"))
				c.handle(reg, nowMs, func(kmsg.Response) {})
			case 1, 2:
				b, _ := c.pending.img.Broker(id)
				hb := heartbeat(id, b.Epoch, fl.endOffset()-1)
				// A broker that began a controlled shutdown keeps asking for it
				// until it restarts (re-registers), as real brokers do. Kafka
				// would otherwise unfence it with InControlledShutdown still
				// set and hand it leaderships; so would we.
				hb.WantShutdown = b.InControlledShutdown || rapid.IntRange(0, 5).Draw(t, "shutdown") == 0
				c.handle(hb, nowMs, func(kmsg.Response) {})
			case 3:
				name := fmt.Sprintf("t%d", rapid.IntRange(0, 5).Draw(t, "topic"))
				c.handle(createTopic(name, int32(rapid.IntRange(1, 6).Draw(t, "parts")), int16(rapid.IntRange(1, 3).Draw(t, "rf"))),
					nowMs, func(kmsg.Response) {})
			case 4:
				req := kmsg.NewPtrDeleteTopicsRequest()
				req.Version = 5
				req.TopicNames = []string{fmt.Sprintf("t%d", rapid.IntRange(0, 5).Draw(t, "topic"))}
				c.handle(req, nowMs, func(kmsg.Response) {})
			case 5:
				nowMs += int64(rapid.IntRange(0, 12000).Draw(t, "ms"))
				c.tick(nowMs)
			case 6:
				n := rapid.IntRange(0, len(fl.batches)-fl.delivered).Draw(t, "commitN")
				bs := fl.batches[fl.delivered : fl.delivered+n]
				fl.delivered += n
				if err := c.commit(bs, nowMs); err != nil {
					t.Fatal(err)
				}
			case 7:
				if rapid.IntRange(0, 3).Draw(t, "failover") == 0 {
					fl.leaderEpoch = -1
					epoch++
					c.leaderChange(quorum.LeaderAndEpoch{LeaderID: 2, Epoch: epoch, EpochStartOffset: -1}, nowMs)
					if rapid.Bool().Draw(t, "truncate") {
						fl.batches = fl.batches[:fl.delivered]
					}
					lead()
				}
			}
			if rapid.IntRange(0, 3).Draw(t, "hold") > 0 {
				commitAll(t, c, fl)
			}
			got := c.committed.visible()
			want := replayLog(t, fl.batches[:fl.delivered])
			if !got.Equal(want) {
				t.Fatalf("controller image differs from replay:\n%s\n--- replay:\n%s", got.Dump(), want.Dump())
			}
			for _, err := range []error{got.Check(), image.CheckTransition(prev, got)} {
				if err != nil {
					t.Fatal(err)
				}
			}
			if c.committed.txnBase == nil && len(c.inflight) == 0 {
				if err := got.CheckLeaders(); err != nil {
					e := &env{log: fl}
					for _, b := range fl.batches[:fl.delivered] {
						e.printBatch(b)
					}
					t.Fatalf("%v\ncommitted log:\n%s", err, e.out.String())
				}
			}
			prev = got
		}
	})
}

func topicRecord(name string) records.Record {
	return records.Record{Message: &records.TopicRecord{Name: name, TopicID: records.UUID{1}}}
}

func partitionRec(replicas, isr []int32, leader int32) records.Record {
	return records.Record{Message: &records.PartitionRecord{PartitionID: 0, TopicID: records.UUID{1},
		Replicas: replicas, ISR: isr, Leader: leader, LeaderEpoch: 0, PartitionEpoch: 0,
		RemovingReplicas: []int32{}, AddingReplicas: []int32{}}}
}

// seqOf streams recs to replay.
func seqOf(recs []offsetRecord) iter.Seq2[offsetRecord, error] {
	return func(yield func(offsetRecord, error) bool) {
		for _, r := range recs {
			if !yield(r, nil) {
				return
			}
		}
	}
}
