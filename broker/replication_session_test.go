package broker

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/kraftd/kraftd/metadata/records"
	"github.com/kraftd/kraftd/replica"
)

// A follower's fetches to its leader run in an incremental fetch session
// (KIP-227), over the real wire against the real leader: the first is full
// and opens a session; then only partitions whose fetch state changed are
// sent and only those with news answered (issue 17: at 100k partitions each
// full round named ~33k partitions both ways); a partition the fetcher stops
// asking for is forgotten on the leader; a session the leader lost is
// replaced by a full fetch in the same call, without an error.
func TestReplicaFetchIncrementalSession(t *testing.T) {
	d := newDataHarness(t, 0)
	repID := uuid(9)
	d.commit(topicRecord("rep", repID),
		partitionRecord(repID, 0, 1, []int32{1, 2}, []int32{1, 2}),
		partitionRecord(repID, 1, 1, []int32{1, 2}, []int32{1, 2}),
		partitionRecord(repID, 2, 1, []int32{1, 2}, []int32{1, 2}))
	for i, v := range []int16{12, 16} { // by name, by topic id
		t.Run(map[int16]string{12: "v12", 16: "v16"}[v], func(t *testing.T) {
			base := int64(2 * i) // the follower's log end before this run's 2 records
			if sp := d.produce(11, 1, "rep", 0, recordBatch(2)); sp.ErrorCode != 0 || sp.BaseOffset != base {
				t.Fatalf("produce: %+v", sp)
			}
			tr := NewReplicaFetchTransport("follower", zaptest.NewLogger(t), func(int32) (string, error) { return d.addr, nil }, v)
			defer tr.Close()
			in := &replica.FetchRequest{ReplicaID: 2, BrokerEpoch: 11, ConnID: int64(v), MaxBytes: 1 << 20, MinBytes: 0}
			for p := range int32(3) {
				off := int64(0)
				if p == 0 {
					off = base
				}
				in.Partitions = append(in.Partitions, replica.FetchPartition{TopicPartition: replica.TopicPartition{Topic: "rep", Partition: p},
					TopicID: repID, FetchOffset: off, LogStartOffset: 0, CurrentLeaderEpoch: -1, LastFetchedEpoch: -1, PartitionMaxBytes: 1 << 20})
			}
			fetch := func(what string) map[int32]replica.FetchedPartition {
				t.Helper()
				as, err := tr.Fetch(context.Background(), 1, in)
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				got := map[int32]replica.FetchedPartition{}
				for _, a := range as {
					if a.Err != nil || a.Topic != "rep" {
						t.Fatalf("%s: answer %+v", what, a)
					}
					got[a.Partition] = a
				}
				return got
			}
			leaderSession := func() (int32, int) {
				s := tr.sessions[int64(v)]
				d.b.api.sessions.mu.Lock()
				defer d.b.api.sessions.mu.Unlock()
				ls, ok := d.b.api.sessions.sessions[s.id]
				if !ok {
					return s.id, -1
				}
				return s.id, len(ls.index)
			}

			if got := fetch("full"); len(got) != 3 || len(got[0].Records) == 0 {
				t.Fatalf("full fetch answered %d partitions (%d bytes of partition 0), want 3", len(got), len(got[0].Records))
			}
			id, n := leaderSession()
			if id == 0 || n != 3 {
				t.Fatalf("after the full fetch: session %d holding %d partitions on the leader, want one of 3", id, n)
			}
			// Partition 0 appended its 2 records: only it is sent, and only it
			// answered, once its high watermark moved to 2 (the answer that
			// moves it carries the one read before, as in Kafka).
			in.Partitions[0].FetchOffset, in.Partitions[0].LastFetchedEpoch = base+2, 0
			req, delta := tr.sessions[int64(v)].request(in, v)
			if delta.full || len(req.Topics) != 1 || len(req.Topics[0].Partitions) != 1 || req.SessionEpoch != 1 {
				t.Fatalf("incremental request: full %v, topics %+v, epoch %d", delta.full, req.Topics, req.SessionEpoch)
			}
			moved := false
			for _, round := range []string{"incremental", "next"} {
				got := fetch(round)
				for p, a := range got {
					if p != 0 {
						t.Fatalf("%s fetch answered unchanged partition %d: %v", round, p, got)
					}
					moved = moved || a.HighWatermark == base+2
				}
			}
			if !moved {
				t.Fatalf("partition 0's high watermark %d never answered", base+2)
			}
			if got := fetch("idle"); len(got) != 0 {
				t.Fatalf("idle incremental fetch answered %v, want nothing", got)
			}
			// The fetcher stops asking for partition 2: the leader forgets it.
			in.Partitions = in.Partitions[:2]
			fetch("forget")
			if id2, n := leaderSession(); id2 != id || n != 2 {
				t.Fatalf("after forgetting partition 2: session %d (was %d) holding %d partitions, want 2", id2, id, n)
			}
			// The leader loses the session: the same call fetches in full.
			d.b.api.sessions.mu.Lock()
			d.b.api.sessions.remove(id)
			d.b.api.sessions.mu.Unlock()
			if got := fetch("after the leader lost the session"); len(got) != 2 {
				t.Fatalf("fetch after the session was lost answered %d partitions, want both", len(got))
			}
			if id3, n := leaderSession(); id3 == 0 || id3 == id || n != 2 {
				t.Fatalf("new session %d (old %d) holding %d partitions, want a new one of 2", id3, id, n)
			}
		})
	}
}

// A session partition held without its name (heldFetch) gives back every
// field of the fetcher's partition: a field added to replica.FetchPartition
// and not held would make every round look unchanged for it (or changed).
func TestHeldFetchKeepsEveryField(t *testing.T) {
	var p replica.FetchPartition
	v := reflect.ValueOf(&p).Elem()
	for i := range v.NumField() {
		setNonZero(t, v.Field(i), int64(i+1))
	}
	if got := heldFetchOf(p).partition(p.TopicPartition); got != p {
		t.Fatalf("held and back: %#v, want %#v", got, p)
	}
}

// setNonZero sets v (of integer, string, byte array or struct of those
// kinds) to values derived from n, none zero.
func setNonZero(t *testing.T, v reflect.Value, n int64) {
	t.Helper()
	switch v.Kind() {
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Int:
		v.SetInt(n)
	case reflect.String:
		v.SetString("t" + string(rune('a'+n)))
	case reflect.Array:
		for i := range v.Len() {
			setNonZero(t, v.Index(i), n+int64(i))
		}
	case reflect.Uint8:
		v.SetUint(uint64(n))
	case reflect.Struct:
		for i := range v.NumField() {
			setNonZero(t, v.Field(i), n*10+int64(i))
		}
	default:
		t.Fatalf("field of kind %s: extend setNonZero", v.Kind())
	}
}

// The replica fetchers' form of a request (replica.FetchRequest.Incremental:
// only what changed, Full for a full request), over the real wire against
// the real leader: Full is read only when a session starts or starts over
// (after any failed call, also one that never left); an answer naming a
// partition the request did not carry is read back under its topic (by
// topic id from v13: the session knows it); forgotten partitions leave the
// leader's session.
func TestReplicaFetchIncrementalRequests(t *testing.T) {
	d := newDataHarness(t, 0)
	incID := uuid(10)
	d.commit(topicRecord("inc", incID),
		partitionRecord(incID, 0, 1, []int32{1, 2}, []int32{1, 2}),
		partitionRecord(incID, 1, 1, []int32{1, 2}, []int32{1, 2}),
		partitionRecord(incID, 2, 1, []int32{1, 2}, []int32{1, 2}))
	for _, v := range []int16{12, 16} {
		t.Run(map[int16]string{12: "v12", 16: "v16"}[v], func(t *testing.T) {
			ends := [3]int64{}
			for p := range int32(3) {
				pp, ok := d.replicas.Partition(replica.TopicPartition{Topic: "inc", Partition: p})
				if !ok {
					t.Fatalf("inc-%d not hosted", p)
				}
				ends[p] = pp.Log().EndOffset()
			}
			if sp := d.produce(11, 1, "inc", 0, recordBatch(2)); sp.ErrorCode != 0 {
				t.Fatalf("produce: %+v", sp)
			}
			down := false
			tr := NewReplicaFetchTransport("follower", zaptest.NewLogger(t), func(int32) (string, error) {
				if down {
					return "", errors.New("leader unreachable")
				}
				return d.addr, nil
			}, v)
			defer tr.Close()
			cur := map[int32]replica.FetchPartition{}
			for p := range int32(3) {
				cur[p] = replica.FetchPartition{TopicPartition: replica.TopicPartition{Topic: "inc", Partition: p},
					TopicID: incID, FetchOffset: ends[p], CurrentLeaderEpoch: -1, LastFetchedEpoch: -1, PartitionMaxBytes: 1 << 20}
			}
			fulls := 0
			in := &replica.FetchRequest{ReplicaID: 2, BrokerEpoch: 11, ConnID: 100 + int64(v), MaxBytes: 1 << 20, MinBytes: 0,
				Incremental: true, Full: func() []replica.FetchPartition {
					fulls++
					var out []replica.FetchPartition
					for _, p := range cur {
						out = append(out, p)
					}
					return out
				}}
			fetch := func(what string, changed []int32, forgotten ...int32) map[int32]replica.FetchedPartition {
				t.Helper()
				in.Partitions, in.Forgotten = nil, nil
				for _, p := range changed {
					in.Partitions = append(in.Partitions, cur[p])
				}
				for _, p := range forgotten {
					in.Forgotten = append(in.Forgotten, replica.TopicPartition{Topic: "inc", Partition: p})
				}
				as, err := tr.Fetch(context.Background(), 1, in)
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				got := map[int32]replica.FetchedPartition{}
				for _, a := range as {
					if a.Err != nil || a.Topic != "inc" {
						t.Fatalf("%s: answer %+v", what, a)
					}
					got[a.Partition] = a
				}
				return got
			}
			if got := fetch("full", nil); fulls != 1 || len(got) != 3 || len(got[0].Records) == 0 {
				t.Fatalf("first fetch: Full read %d times, %d partitions answered", fulls, len(got))
			}
			p0 := cur[0]
			p0.FetchOffset = ends[0] + 2
			cur[0] = p0
			fetch("partition 0 appended", []int32{0})
			// New data on partition 1: the idle request's answer names it,
			// though the request carries nothing.
			if sp := d.produce(11, 1, "inc", 1, recordBatch(3)); sp.ErrorCode != 0 {
				t.Fatalf("produce: %+v", sp)
			}
			if got := fetch("idle", nil); len(got[1].Records) == 0 {
				t.Fatalf("idle fetch answered %v, want partition 1's new records", got)
			}
			if fulls != 1 {
				t.Fatalf("Full read %d times in a session, want once", fulls)
			}
			p1 := cur[1]
			p1.FetchOffset = ends[1] + 3
			cur[1] = p1
			fetch("forget", []int32{1}, 2)
			delete(cur, 2)
			s := tr.sessions[in.ConnID]
			d.b.api.sessions.mu.Lock()
			held := len(d.b.api.sessions.sessions[s.id].index)
			d.b.api.sessions.mu.Unlock()
			if held != 2 {
				t.Fatalf("after forgetting partition 2 the leader's session holds %d partitions, want 2", held)
			}
			down = true
			if _, err := tr.Fetch(context.Background(), 1, in); err == nil {
				t.Fatal("fetch from an unreachable leader succeeded")
			}
			down = false
			if got := fetch("after a failed call", nil); fulls != 2 || len(got) != 2 {
				t.Fatalf("after a failed call: Full read %d times (want 2), %d partitions answered (want 2)", fulls, len(got))
			}
		})
	}
}

// A topic deleted and created again under its name has a new topic id: a
// follower's session, which holds its partitions under the old id, sends
// them under the new one and forgets the old (topic id, partition) in the
// same request (Kafka's FetchSessionHandler, "replaced" partitions,
// KIP-516), so the leader's session, keyed by topic id from v13, holds
// only the new ones; before, the old stayed there until the session ended.
// Both request forms: every partition, and only the changed (Incremental).
func TestReplicaFetchSessionForgetsRecreatedTopicsOldID(t *testing.T) {
	d := newDataHarness(t, 0)
	for i, incremental := range []bool{false, true} {
		t.Run(map[bool]string{false: "all", true: "incremental"}[incremental], func(t *testing.T) {
			oldID, newID := uuid(byte(20+2*i)), uuid(byte(21+2*i))
			topic := fmt.Sprintf("again%d", i)
			d.commit(topicRecord(topic, oldID),
				partitionRecord(oldID, 0, 1, []int32{1, 2}, []int32{1, 2}),
				partitionRecord(oldID, 1, 1, []int32{1, 2}, []int32{1, 2}))
			tr := NewReplicaFetchTransport("follower", zaptest.NewLogger(t), func(int32) (string, error) { return d.addr, nil }, 16)
			defer tr.Close()
			cur := make([]replica.FetchPartition, 2)
			setID := func(id records.UUID) {
				for p := range cur {
					cur[p] = replica.FetchPartition{TopicPartition: replica.TopicPartition{Topic: topic, Partition: int32(p)},
						TopicID: id, CurrentLeaderEpoch: -1, LastFetchedEpoch: -1, PartitionMaxBytes: 1 << 20}
				}
			}
			setID(oldID)
			in := &replica.FetchRequest{ReplicaID: 2, BrokerEpoch: 11, ConnID: 200 + int64(i), MaxBytes: 1 << 20,
				Incremental: incremental, Full: func() []replica.FetchPartition { return slices.Clone(cur) }}
			fetch := func(what string) {
				t.Helper()
				in.Partitions = cur
				if _, err := tr.Fetch(context.Background(), 1, in); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
			}
			leaderHolds := func() map[[16]byte]int {
				s := tr.sessions[in.ConnID]
				d.b.api.sessions.mu.Lock()
				defer d.b.api.sessions.mu.Unlock()
				ls, ok := d.b.api.sessions.sessions[s.id]
				if !ok {
					t.Fatalf("the leader has no session %d", s.id)
				}
				ids := map[[16]byte]int{}
				for k := range ls.index {
					ids[k.topicID]++
				}
				return ids
			}
			fetch("full")
			if got := leaderHolds(); len(got) != 1 || got[oldID] != 2 {
				t.Fatalf("after the full fetch the leader's session holds %v, want 2 partitions of the old id", got)
			}
			d.commit(&records.RemoveTopicRecord{TopicID: oldID}, topicRecord(topic, newID),
				partitionRecord(newID, 0, 1, []int32{1, 2}, []int32{1, 2}),
				partitionRecord(newID, 1, 1, []int32{1, 2}, []int32{1, 2}))
			setID(newID)
			fetch("recreated")
			if got := leaderHolds(); len(got) != 1 || got[newID] != 2 {
				t.Fatalf("after the topic was recreated the leader's session holds %v (by topic id), want 2 partitions of the new id only", got)
			}
			s := tr.sessions[in.ConnID]
			if len(s.parts) != 2 || len(s.topics) != 1 || s.topics[newID] == nil || s.topics[newID].parts != 2 {
				t.Fatalf("the follower's session holds %v under topics %v, want 2 partitions of the new id", s.parts, s.topics)
			}
			fetch("idle") // the session is still good
		})
	}
}
