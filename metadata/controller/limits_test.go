package controller

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Issue 12: counts and assignment sizes from the network are checked
// against the per-request record cap before anything proportional to them
// is allocated. Before the cap, NumPartitions 2147483647 made the placer
// allocate 2^31 replica lists (about 51 GB) and the controller died.

// tooLarge reports whether every topic of a CreateTopics or
// CreatePartitions response is Kafka's answer to an over-cap request.
func tooLarge(t *testing.T, resp kmsg.Response) {
	t.Helper()
	check := func(topic string, code int16, msg *string) {
		if code != kerr.PolicyViolation.Code || msg == nil || *msg != excessivelyLargeMessage {
			t.Errorf("%s: error %d %v, want POLICY_VIOLATION %q", topic, code, msgOf(msg), excessivelyLargeMessage)
		}
	}
	switch r := resp.(type) {
	case *kmsg.CreateTopicsResponse:
		for _, rt := range r.Topics {
			check(rt.Topic, rt.ErrorCode, rt.ErrorMessage)
			if rt.NumPartitions != -1 || rt.ReplicationFactor != -1 {
				t.Errorf("%s: partitions %d rf %d in an error answer", rt.Topic, rt.NumPartitions, rt.ReplicationFactor)
			}
		}
	case *kmsg.CreatePartitionsResponse:
		for _, rt := range r.Topics {
			check(rt.Topic, rt.ErrorCode, rt.ErrorMessage)
		}
	default:
		t.Fatalf("unexpected %T", resp)
	}
}

func msgOf(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// noWrites runs req on c and checks that nothing was appended.
func noWrites(t *testing.T, c *core, fl *fakeLog, req kmsg.Request) kmsg.Response {
	t.Helper()
	before := fl.endOffset()
	resp := run(t, c, fl, req)
	if after := fl.endOffset(); after != before {
		t.Errorf("%d records appended", after-before)
	}
	return resp
}

// tooManyPartitions reports whether every topic of a CreateTopics response
// is Kafka's answer to a request over MAX_PARTITIONS_PER_BATCH.
func tooManyPartitions(t *testing.T, resp kmsg.Response) {
	t.Helper()
	r := resp.(*kmsg.CreateTopicsResponse)
	if len(r.Topics) == 0 {
		t.Fatal("no topic answered")
	}
	for _, rt := range r.Topics {
		if rt.ErrorCode != kerr.PolicyViolation.Code || msgOf(rt.ErrorMessage) != tooManyPartitionsMessage {
			t.Errorf("%s: error %d %v, want POLICY_VIOLATION %q", rt.Topic, rt.ErrorCode, msgOf(rt.ErrorMessage), tooManyPartitionsMessage)
		}
		if rt.NumPartitions != -1 || rt.ReplicationFactor != -1 {
			t.Errorf("%s: partitions %d rf %d in an error answer", rt.Topic, rt.NumPartitions, rt.ReplicationFactor)
		}
	}
}

func TestCreateTopicsMaxPartitionsIsPolicyViolation(t *testing.T) {
	fl := &fakeLog{leaderEpoch: -1}
	c := activeCore(t, fl, 3)
	for _, validateOnly := range []bool{false, true} {
		req := createTopic("huge", math.MaxInt32, 3)
		req.ValidateOnly = validateOnly
		tooManyPartitions(t, noWrites(t, c, fl, req))
	}
	// The whole request fails, as Kafka's PolicyViolationException from
	// validateTotalNumberOfPartitions: the small topic next to the huge one
	// is not created either.
	req := createTopic("small", 1, 1)
	big := kmsg.NewCreateTopicsRequestTopic()
	big.Topic, big.NumPartitions, big.ReplicationFactor = "huge", math.MaxInt32, 1
	req.Topics = append(req.Topics, big)
	resp := noWrites(t, c, fl, req).(*kmsg.CreateTopicsResponse)
	if len(resp.Topics) != 2 {
		t.Fatalf("%d topics answered, want 2", len(resp.Topics))
	}
	tooManyPartitions(t, resp)
	// Kafka counts the partitions before it looks at anything else, so a
	// replication factor the brokers cannot reach is not what it reports.
	tooManyPartitions(t, noWrites(t, c, fl, createTopic("huge", math.MaxInt32, 4)))
}

// Issue 17: Kafka's controller refuses a CreateTopics asking for more than
// 10,000 partitions over all its topics (MAX_PARTITIONS_PER_BATCH), with
// POLICY_VIOLATION for every topic, ValidateOnly or not; 10,000 pass. A
// create of 100,000 partitions in one request made the quorum leader
// append ~100,000 records in one burst. Names given twice are not counted
// (Kafka drops them before the controller), NumPartitions -1 counts
// num.partitions, and manual assignments count one partition each.
func TestCreateTopicsOver10kPartitionsIsPolicyViolation(t *testing.T) {
	fl := &fakeLog{leaderEpoch: -1}
	// The record cap is raised (kraftd's extension) so that ten topics of
	// 1,000 (10,010 records) can be created: this test is about the
	// partitions count, which no cap changes. At the default cap Kafka
	// refuses them as too many records (TestDefaultUserOpCapCreateTopics).
	c := activeCore(t, fl, 3, func(cfg *Config) { cfg.DefaultNumPartitions = 3; cfg.MaxRecordsPerUserOp = 20_000 })
	topics := func(prefix string, n int, parts int32) *kmsg.CreateTopicsRequest {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.SetVersion(7)
		for i := range n {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = fmt.Sprintf("%s%d", prefix, i), parts, 3
			req.Topics = append(req.Topics, rt)
		}
		return req
	}
	for _, validateOnly := range []bool{true, false} {
		req := topics("over", 10, 1000)
		req.Topics[9].NumPartitions = 1001
		req.ValidateOnly = validateOnly
		tooManyPartitions(t, noWrites(t, c, fl, req))
	}
	// -1 takes num.partitions (3): 9,998 + 3 is over.
	req := topics("dflt", 2, 4999)
	extra := kmsg.NewCreateTopicsRequestTopic()
	extra.Topic, extra.NumPartitions, extra.ReplicationFactor = "dflt-extra", -1, 3
	req.Topics = append(req.Topics, extra)
	tooManyPartitions(t, noWrites(t, c, fl, req))
	// A manual assignment counts its entries: 9,999 + 2 is over.
	req = topics("manual", 1, 9999)
	man := kmsg.NewCreateTopicsRequestTopic()
	man.Topic, man.NumPartitions, man.ReplicationFactor = "manual-extra", -1, -1
	for p := range int32(2) {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = p, []int32{1, 2, 3}
		man.ReplicaAssignment = append(man.ReplicaAssignment, a)
	}
	req.Topics = append(req.Topics, man)
	tooManyPartitions(t, noWrites(t, c, fl, req))

	// Exactly 10,000 are created, and a name given twice (answered
	// INVALID_REQUEST) does not count toward the cap.
	req = topics("ok", 10, 1000)
	dup := kmsg.NewCreateTopicsRequestTopic()
	dup.Topic, dup.NumPartitions, dup.ReplicationFactor = "twice", 5000, 3
	req.Topics = append(req.Topics, dup, dup)
	resp := run(t, c, fl, req).(*kmsg.CreateTopicsResponse)
	for _, rt := range resp.Topics {
		want := int16(0)
		if rt.Topic == "twice" {
			want = kerr.InvalidRequest.Code
		}
		if rt.ErrorCode != want {
			t.Errorf("%s: error %d %v, want %d", rt.Topic, rt.ErrorCode, msgOf(rt.ErrorMessage), want)
		}
	}
	if n := c.committed.img.NumPartitions(); n != 10_000 {
		t.Fatalf("%d partitions committed, want 10000", n)
	}
}

func TestCreateTopicsHugeManualAssignmentIsPolicyViolation(t *testing.T) {
	fl := &fakeLog{leaderEpoch: -1}
	c := activeCore(t, fl, 3, func(cfg *Config) { cfg.MaxRecordsPerUserOp = 1000 })
	// One TopicRecord plus MaxRecordsPerUserOp PartitionRecords: one over
	// the record cap, under the partition cap.
	req := createTopic("manual", -1, -1)
	replicas := []int32{1, 2, 3}
	for i := range 1000 {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(i), replicas
		req.Topics[0].ReplicaAssignment = append(req.Topics[0].ReplicaAssignment, a)
	}
	tooLarge(t, noWrites(t, c, fl, req))
	req.ValidateOnly = true
	tooLarge(t, noWrites(t, c, fl, req))
}

// Replica lists are checked in one pass for Kafka's first offending id in
// ascending order, however long the list.
func TestManualAssignmentReplicaChecks(t *testing.T) {
	fl := &fakeLog{leaderEpoch: -1}
	c := activeCore(t, fl, 3)
	long := make([]int32, 1_000_000)
	for i := range long {
		long[i] = int32(i%3 + 1)
	}
	for _, tc := range []struct {
		replicas []int32
		want     string
	}{
		{long, "The manual partition assignment includes the broker 1 more than once."},
		{[]int32{3, -5, 2, 3}, "The manual partition assignment includes broker -5, but no such broker is registered."},
		{[]int32{2, 1, 2, 9}, "The manual partition assignment includes the broker 2 more than once."},
		{[]int32{9, 3, 3}, "The manual partition assignment includes the broker 3 more than once."},
		{[]int32{math.MaxInt32, math.MinInt32}, "The manual partition assignment includes broker -2147483648, but no such broker is registered."},
		{[]int32{}, "The manual partition assignment includes an empty replica list."},
	} {
		req := createTopic("manual", -1, -1)
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Replicas = tc.replicas
		req.Topics[0].ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{a}
		rt := noWrites(t, c, fl, req).(*kmsg.CreateTopicsResponse).Topics[0]
		if rt.ErrorCode != kerr.InvalidReplicaAssignment.Code || msgOf(rt.ErrorMessage) != tc.want {
			t.Errorf("replicas %.10v: error %d %q, want %q", tc.replicas, rt.ErrorCode, msgOf(rt.ErrorMessage), tc.want)
		}
	}
}

func createPartitions(topic string, count int32) *kmsg.CreatePartitionsRequest {
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.Version = 3
	t := kmsg.NewCreatePartitionsRequestTopic()
	t.Topic, t.Count = topic, count
	req.Topics = append(req.Topics, t)
	return req
}

// unknownServerError checks that every topic of a CreatePartitions
// response named in want is Kafka's answer to a topic that overflowed its
// BoundedList: UNKNOWN_SERVER_ERROR, no message.
func unknownServerError(t *testing.T, resp *kmsg.CreatePartitionsResponse, want ...string) {
	t.Helper()
	for _, rt := range resp.Topics {
		if slices.Contains(want, rt.Topic) && (rt.ErrorCode != kerr.UnknownServerError.Code || rt.ErrorMessage != nil) {
			t.Errorf("%s: error %d %v, want UNKNOWN_SERVER_ERROR and no message", rt.Topic, rt.ErrorCode, msgOf(rt.ErrorMessage))
		}
	}
}

// A CreatePartitions past the cap: Kafka catches the BoundedList's
// exception per topic, so the topic is UNKNOWN_SERVER_ERROR (not the
// POLICY_VIOLATION of CreateTopics), ValidateOnly too, and nothing of
// its size is allocated.
func TestCreatePartitionsMaxCountIsUnknownServerError(t *testing.T) {
	fl := &fakeLog{leaderEpoch: -1}
	c := activeCore(t, fl, 3)
	if r := run(t, c, fl, createTopic("t", 1, 3)).(*kmsg.CreateTopicsResponse); r.Topics[0].ErrorCode != 0 {
		t.Fatalf("create: error %d", r.Topics[0].ErrorCode)
	}
	for _, validateOnly := range []bool{false, true} {
		req := createPartitions("t", math.MaxInt32)
		req.ValidateOnly = validateOnly
		unknownServerError(t, noWrites(t, c, fl, req).(*kmsg.CreatePartitionsResponse), "t")
	}
	// Assignments that do not match the count are refused by their length.
	req := createPartitions("t", math.MaxInt32)
	req.Topics[0].Assignment = []kmsg.CreatePartitionsRequestTopicAssignment{{Replicas: []int32{1, 2, 3}}}
	rt := noWrites(t, c, fl, req).(*kmsg.CreatePartitionsResponse).Topics[0]
	if rt.ErrorCode != kerr.InvalidReplicaAssignment.Code {
		t.Errorf("one assignment for 2^31-2 partitions: error %d", rt.ErrorCode)
	}
}

// The default cap is Kafka's MAX_RECORDS_PER_USER_OP, 10000 records, and
// CreateTopics meets Kafka's answers on both sides of it: a topic of 9,998
// or 9,999 partitions (9,999 and 10,000 records) is created, 10,000
// partitions (10,001 records) are refused whole with "Unable to perform
// excessively large batch operation.", ValidateOnly too, and 10,001 with
// "Excessively large number of partitions per request.". A config record
// counts, and so does every topic of the request.
func TestDefaultUserOpCapCreateTopics(t *testing.T) {
	fl := &fakeLog{leaderEpoch: -1}
	c := activeCore(t, fl, 1)
	if c.cfg.MaxRecordsPerUserOp != 10_000 {
		t.Fatalf("default cap %d, want Kafka's 10000", c.cfg.MaxRecordsPerUserOp)
	}
	created := func(req *kmsg.CreateTopicsRequest, partitions int) {
		t.Helper()
		before := c.committed.img.NumPartitions()
		for _, rt := range run(t, c, fl, req).(*kmsg.CreateTopicsResponse).Topics {
			if rt.ErrorCode != 0 {
				t.Fatalf("%s: error %d %v", rt.Topic, rt.ErrorCode, msgOf(rt.ErrorMessage))
			}
		}
		if got := c.committed.img.NumPartitions() - before; got != partitions {
			t.Fatalf("%d partitions committed, want %d", got, partitions)
		}
	}
	created(createTopic("n-minus-1", 9_998, 1), 9_998)
	created(createTopic("n", 9_999, 1), 9_999)
	for _, validateOnly := range []bool{false, true} {
		req := createTopic("n-plus-1", 10_000, 1)
		req.ValidateOnly = validateOnly
		tooLarge(t, noWrites(t, c, fl, req))
		req = createTopic("n-plus-1", 10_001, 1)
		req.ValidateOnly = validateOnly
		tooManyPartitions(t, noWrites(t, c, fl, req))
	}
	withConfig := func(name string, partitions int32) *kmsg.CreateTopicsRequest {
		req := createTopic(name, partitions, 1)
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = "retention.ms", kmsg.StringPtr("1000")
		req.Topics[0].Configs = append(req.Topics[0].Configs, cfg)
		return req
	}
	tooLarge(t, noWrites(t, c, fl, withConfig("cfg", 9_999)))
	created(withConfig("cfg", 9_998), 9_998)
	// Two topics of 4,999: 10,000 records; 4,999 and 5,000: one over, and
	// the first topic is not created either.
	two := func(prefix string, a, b int32) *kmsg.CreateTopicsRequest {
		req := createTopic(prefix+"-a", a, 1)
		req.Topics = append(req.Topics, createTopic(prefix+"-b", b, 1).Topics[0])
		return req
	}
	r := noWrites(t, c, fl, two("over", 4_999, 5_000))
	tooLarge(t, r)
	if n := len(r.(*kmsg.CreateTopicsResponse).Topics); n != 2 {
		t.Fatalf("%d topics answered, want 2", n)
	}
	created(two("fit", 4_999, 4_999), 9_998)
}

// CreatePartitions at the default cap: 9,999 and 10,000 new partitions
// are created, 10,001 are UNKNOWN_SERVER_ERROR with nothing written. With
// several topics, the one that overflows and every later one that would
// add a partition are UNKNOWN_SERVER_ERROR (Kafka's list is full by
// then), while the earlier ones are created and a later one with its own
// error keeps it. More topics than the cap overflow Kafka's list of
// results: the whole request is POLICY_VIOLATION; exactly the cap is not.
func TestDefaultUserOpCapCreatePartitions(t *testing.T) {
	fl := &fakeLog{leaderEpoch: -1}
	c := activeCore(t, fl, 1)
	for _, name := range []string{"p", "x", "y", "z"} {
		if r := run(t, c, fl, createTopic(name, 1, 1)).(*kmsg.CreateTopicsResponse); r.Topics[0].ErrorCode != 0 {
			t.Fatalf("create %s: error %d", name, r.Topics[0].ErrorCode)
		}
	}
	parts := func(name string) int {
		topic, _ := c.committed.img.TopicByName(name)
		return topic.NumPartitions()
	}
	grow := func(add int32, wantErr int16) {
		t.Helper()
		cur := int32(parts("p"))
		resp := run(t, c, fl, createPartitions("p", cur+add)).(*kmsg.CreatePartitionsResponse)
		if rt := resp.Topics[0]; rt.ErrorCode != wantErr {
			t.Fatalf("+%d: error %d %v, want %d", add, rt.ErrorCode, msgOf(rt.ErrorMessage), wantErr)
		}
		want := cur + add
		if wantErr != 0 {
			unknownServerError(t, resp, "p")
			want = cur
		}
		if got := int32(parts("p")); got != want {
			t.Fatalf("+%d: %d partitions, want %d", add, got, want)
		}
	}
	grow(9_999, 0)
	grow(10_000, 0)
	grow(10_001, kerr.UnknownServerError.Code)

	req := createPartitions("x", 6_001)
	for _, tc := range []struct {
		name  string
		count int32
	}{{"y", 6_001}, {"z", 2}, {"p", 1}, {"missing", 5}} {
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = tc.name, tc.count
		req.Topics = append(req.Topics, rt)
	}
	resp := run(t, c, fl, req).(*kmsg.CreatePartitionsResponse)
	want := map[string]int16{"x": 0, "y": kerr.UnknownServerError.Code, "z": kerr.UnknownServerError.Code,
		"p": kerr.InvalidPartitions.Code, "missing": kerr.UnknownTopicOrPartition.Code}
	for _, rt := range resp.Topics {
		if rt.ErrorCode != want[rt.Topic] {
			t.Errorf("%s: error %d %v, want %d", rt.Topic, rt.ErrorCode, msgOf(rt.ErrorMessage), want[rt.Topic])
		}
	}
	unknownServerError(t, resp, "y", "z")
	if x, y, z := parts("x"), parts("y"), parts("z"); x != 6_001 || y != 1 || z != 1 {
		t.Fatalf("partitions x %d y %d z %d, want 6001 1 1", x, y, z)
	}

	many := func(n int) *kmsg.CreatePartitionsRequest {
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.Version = 3
		for i := range n {
			rt := kmsg.NewCreatePartitionsRequestTopic()
			rt.Topic, rt.Count = fmt.Sprintf("none%d", i), 2
			req.Topics = append(req.Topics, rt)
		}
		return req
	}
	for _, rt := range noWrites(t, c, fl, many(10_000)).(*kmsg.CreatePartitionsResponse).Topics {
		if rt.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("%s: error %d, want UNKNOWN_TOPIC_OR_PARTITION", rt.Topic, rt.ErrorCode)
		}
	}
	tooLarge(t, noWrites(t, c, fl, many(10_001)))
	// A name given twice is answered apart (INVALID_REQUEST) and not counted.
	req = many(10_000)
	req.Topics = append(req.Topics, req.Topics[0])
	for _, rt := range noWrites(t, c, fl, req).(*kmsg.CreatePartitionsResponse).Topics {
		if rt.ErrorCode == kerr.PolicyViolation.Code {
			t.Fatalf("%s: POLICY_VIOLATION with 9,999 distinct topics", rt.Topic)
		}
	}
}

// DeleteTopics at the default cap: Kafka deletes the topics that fit in
// its BoundedList and answers each one after them UNKNOWN_SERVER_ERROR with
// no message; the request itself succeeds. Before, kraftd refused the
// whole request with POLICY_VIOLATION.
func TestDefaultUserOpCapDeleteTopics(t *testing.T) {
	fl := &fakeLog{leaderEpoch: -1}
	c := activeCore(t, fl, 1)
	const n = 10_001
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("d%05d", i)
	}
	for lo := 0; lo < n; lo += 5_000 { // 2 records a topic
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version = 7
		for _, name := range names[lo:min(lo+5_000, n)] {
			req.Topics = append(req.Topics, createTopic(name, 1, 1).Topics[0])
		}
		for _, rt := range run(t, c, fl, req).(*kmsg.CreateTopicsResponse).Topics {
			if rt.ErrorCode != 0 {
				t.Fatalf("create %s: error %d", rt.Topic, rt.ErrorCode)
			}
		}
	}
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version = 5
	req.TopicNames = names
	resp := run(t, c, fl, req).(*kmsg.DeleteTopicsResponse)
	if len(resp.Topics) != n {
		t.Fatalf("%d topics answered, want %d", len(resp.Topics), n)
	}
	for i, rt := range resp.Topics {
		switch {
		case i < n-1 && rt.ErrorCode != 0:
			t.Fatalf("%s: error %d", msgOf(rt.Topic), rt.ErrorCode)
		case i == n-1 && (rt.ErrorCode != kerr.UnknownServerError.Code || rt.ErrorMessage != nil):
			t.Fatalf("%s: error %d %v, want UNKNOWN_SERVER_ERROR and no message", msgOf(rt.Topic), rt.ErrorCode, msgOf(rt.ErrorMessage))
		}
	}
	if got := c.committed.img.NumTopics(); got != 1 {
		t.Fatalf("%d topics left, want 1", got)
	}
	if _, ok := c.committed.img.TopicByName(names[n-1]); !ok {
		t.Fatalf("%s was deleted", names[n-1])
	}
}
