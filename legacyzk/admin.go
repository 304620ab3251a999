package legacyzk

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	mrand "math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/metadata/records"
)

// Admin requests in ZooKeeper mode (ZkAdminManager + AdminZkClient): the
// broker that receives them writes ZooKeeper itself and the controller
// reacts to the watch; the broker then waits (DelayedCreatePartitions /
// DelayedDeleteTopics) until its own cache shows the result or the
// request's timeout passes (REQUEST_TIMED_OUT). Error codes are those of
// KRaft mode.

// CreateTopics creates topics by writing /config/topics/<t> and
// /brokers/topics/<t> (assignment JSON v3 with a fresh topic id).
//
// Every topic is checked first, and the records the ones that pass would
// be in KRaft mode (the topic, its configs, its partitions) are counted
// against Config.MaxRecordsPerUserOp before any assignment is built or
// anything written: past it, every topic is answered POLICY_VIOLATION
// "Unable to perform excessively large batch operation.", validate-only
// too, as the KRaft controller answers. This cap is kraftd's: a Kafka
// ZooKeeper-era broker allocated the whole assignment first.
func (b *Broker) CreateTopics(ctx context.Context, req *kmsg.CreateTopicsRequest) (*kmsg.CreateTopicsResponse, error) {
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	st := b.Store()
	brokers, err := liveBrokerIDs(ctx, st)
	if err != nil {
		return nil, err
	}
	seen := map[string]int{}
	for _, t := range req.Topics {
		seen[t.Topic]++
	}
	budget := recordBudget(b.cfg.MaxRecordsPerUserOp)
	plans := make([]topicPlan, len(req.Topics))
	for i, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = t.Topic, -1, -1
		if seen[t.Topic] > 1 {
			setErr(&rt.ErrorCode, &rt.ErrorMessage, kerr.InvalidRequest, "duplicate topic name in the request")
		} else if e, msg := b.checkTopic(ctx, st, t, brokers, &budget, &plans[i]); e == errTooLarge {
			return excessivelyLargeCreate(req), nil
		} else if e != nil {
			setErr(&rt.ErrorCode, &rt.ErrorMessage, e, msg)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	var waitFor []*kmsg.CreateTopicsResponseTopic
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		if rt.ErrorCode != 0 {
			continue
		}
		b.createOne(ctx, st, req.ValidateOnly, req.Topics[i], plans[i], brokers, rt)
		if rt.ErrorCode == 0 && !req.ValidateOnly {
			waitFor = append(waitFor, rt)
		}
	}
	b.awaitCache(ctx, req.TimeoutMillis, func(img *image.Image) bool {
		for _, rt := range waitFor {
			if !hasLeaders(img, rt.Topic, int(rt.NumPartitions)) {
				return false
			}
		}
		return true
	}, func() {
		for _, rt := range waitFor {
			if !hasLeaders(b.Image(), rt.Topic, int(rt.NumPartitions)) {
				setErr(&rt.ErrorCode, &rt.ErrorMessage, kerr.RequestTimedOut, "")
			}
		}
	})
	return resp, nil
}

func setErr(code *int16, msg **string, e *kerr.Error, text string) {
	*code = e.Code
	if text != "" {
		*msg = &text
	}
}

// topicPlan is what checkTopic found a topic to need: its partition
// count and replication factor (for a manual assignment, its size).
type topicPlan struct {
	partitions int32
	rf         int
}

// checkTopic validates one topic of a CreateTopics and takes its records
// from budget (errTooLarge when they do not fit), allocating nothing of
// the topic's size: the name, the count and replication factor (or the
// manual assignment's shape), that it does not exist, then the budget,
// then every manual assignment entry.
func (b *Broker) checkTopic(ctx context.Context, st Store, t kmsg.CreateTopicsRequestTopic, brokers []int32,
	budget *recordBudget, plan *topicPlan) (*kerr.Error, string) {
	if err := validTopic(t.Topic); err != "" {
		return kerr.InvalidTopicException, err
	}
	manual := len(t.ReplicaAssignment) > 0
	n, rf := t.NumPartitions, t.ReplicationFactor
	if manual {
		if n != -1 || rf != -1 {
			return kerr.InvalidRequest, "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time."
		}
		n = int32(len(t.ReplicaAssignment))
	} else {
		if n == -1 {
			n = b.cfg.NumPartitions
		}
		if rf == -1 {
			rf = b.cfg.DefaultReplicationFactor
		}
		switch {
		case n <= 0:
			return kerr.InvalidPartitions, "Number of partitions must be larger than 0."
		case rf <= 0:
			return kerr.InvalidReplicationFactor, "Replication factor must be larger than 0."
		case int(rf) > len(brokers):
			return kerr.InvalidReplicationFactor, fmt.Sprintf("Replication factor: %d larger than available brokers: %d.", rf, len(brokers))
		}
	}
	if _, ok, err := st.Exists(ctx, TopicPath(t.Topic), false); err != nil {
		return kerr.UnknownServerError, err.Error()
	} else if ok {
		return kerr.TopicAlreadyExists, "Topic '" + t.Topic + "' already exists."
	}
	if !budget.take(1 + len(t.Configs) + int(n)) {
		return errTooLarge, excessivelyLargeMessage
	}
	plan.partitions, plan.rf = n, int(rf)
	if manual {
		size, e, msg := checkManualAssignment(t.ReplicaAssignment, brokers)
		plan.rf = size
		return e, msg
	}
	return nil, ""
}

// checkManualAssignment is AdminZkClient.validateTopicCreate's check of a
// manual assignment, in its order: every replica list of one size, no
// broker twice in a list, partitions 0..n-1 once each. kraftd also refuses
// empty lists and brokers that are not registered (Kafka's ZooKeeper-mode
// CreateTopics let them through; its CreatePartitions and the KRaft
// controller refuse them), which bounds every list by the live brokers.
// It copies nothing; its only allocation is one bit per partition.
func checkManualAssignment(as []kmsg.CreateTopicsRequestTopicReplicaAssignment, brokers []int32) (int, *kerr.Error, string) {
	rf := len(as[0].Replicas)
	for _, a := range as {
		if len(a.Replicas) != rf {
			return 0, kerr.InvalidReplicaAssignment, "All partitions should have the same number of replicas"
		}
	}
	if rf == 0 {
		return 0, kerr.InvalidReplicaAssignment, "The manual partition assignment includes an empty replica list."
	}
	for _, a := range as {
		if e, msg := checkReplicas(a.Partition, a.Replicas, brokers); e != nil {
			return 0, e, msg
		}
	}
	seen := make([]uint64, (len(as)+63)/64)
	for _, a := range as {
		p := int(a.Partition)
		if p < 0 || p >= len(as) || seen[p/64]&(1<<(p%64)) != 0 {
			return 0, kerr.InvalidReplicaAssignment, "partitions should be a consecutive 0-based integer sequence"
		}
		seen[p/64] |= 1 << (p % 64)
	}
	return rf, nil, ""
}

// checkReplicas refuses a replica list naming a broker that is not live
// (brokers is sorted) or one broker twice, with Kafka's messages from
// AdminZkClient.validateReplicaAssignment. Unknown ids are checked first,
// so the duplicate check's set never outgrows the live brokers.
func checkReplicas(partition int32, replicas, brokers []int32) (*kerr.Error, string) {
	for _, r := range replicas {
		if _, ok := slices.BinarySearch(brokers, r); !ok {
			return kerr.InvalidReplicaAssignment, fmt.Sprintf("Unknown broker(s) in replica assignment: %d.", r)
		}
	}
	if len(replicas) > len(brokers) {
		return kerr.InvalidReplicaAssignment, fmt.Sprintf("Duplicate brokers not allowed in replica assignment for partition id %d.", partition)
	}
	seen := make(map[int32]bool, len(replicas))
	for _, r := range replicas {
		if seen[r] {
			return kerr.InvalidReplicaAssignment, fmt.Sprintf("Duplicate brokers not allowed in replica assignment: %d for partition id %d.", r, partition)
		}
		seen[r] = true
	}
	return nil, ""
}

// createOne builds the assignment of a topic checkTopic passed and writes
// it (not with validateOnly); errors land in rt.
func (b *Broker) createOne(ctx context.Context, st Store, validateOnly bool, t kmsg.CreateTopicsRequestTopic,
	plan topicPlan, brokers []int32, rt *kmsg.CreateTopicsResponseTopic) {
	rt.NumPartitions, rt.ReplicationFactor = plan.partitions, int16(plan.rf)
	if validateOnly {
		return
	}
	var assignment map[int32][]int32
	if len(t.ReplicaAssignment) > 0 {
		assignment = make(map[int32][]int32, len(t.ReplicaAssignment))
		for _, ra := range t.ReplicaAssignment {
			assignment[ra.Partition] = slices.Clone(ra.Replicas)
		}
	} else {
		rng := mrand.New(mrand.NewPCG(uint64(time.Now().UnixNano()), uint64(b.cfg.NodeID)))
		assignment = assignReplicas(brokers, plan.partitions, plan.rf, 0, rng.IntN(len(brokers)), rng.IntN(len(brokers)))
	}
	var id records.UUID
	_, _ = rand.Read(id[:])
	rt.TopicID = id
	if err := writeTopic(ctx, st, t, TopicAssignment{ID: id, Partitions: assignment}); err != nil {
		if errors.Is(err, ErrNodeExists) {
			setErr(&rt.ErrorCode, &rt.ErrorMessage, kerr.TopicAlreadyExists, "Topic '"+t.Topic+"' already exists.")
		} else {
			setErr(&rt.ErrorCode, &rt.ErrorMessage, kerr.UnknownServerError, err.Error())
		}
		rt.TopicID = [16]byte{}
	}
}

// writeTopic is AdminZkClient.createTopicWithAssignment: the config znode
// first, then the assignment the controller watches for.
func writeTopic(ctx context.Context, st Store, t kmsg.CreateTopicsRequestTopic, a TopicAssignment) error {
	cfg := map[string]string{}
	for _, c := range t.Configs {
		if c.Value != nil {
			cfg[c.Name] = *c.Value
		}
	}
	data, _ := json.Marshal(struct {
		Version int               `json:"version"`
		Config  map[string]string `json:"config"`
	}{1, cfg})
	p := ConfigTopicsPath + "/" + t.Topic
	if _, err := st.Create(ctx, p, data, Persistent); errors.Is(err, ErrNodeExists) {
		_, err = st.Set(ctx, p, data, -1)
		if err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	_, err := st.Create(ctx, TopicPath(t.Topic), EncodeTopic(a), Persistent)
	return err
}

// assignReplicas is the rack-unaware placement of AdminUtils: partition
// leaders go round-robin from a random start, followers at a shift that
// grows each time the leaders wrap around, so replicas spread evenly.
// Partitions get ids firstPartition, firstPartition+1, ...
func assignReplicas(brokers []int32, partitions int32, rf int, firstPartition int32, startIndex, shift int) map[int32][]int32 {
	n := len(brokers)
	out := make(map[int32][]int32, partitions)
	cur := int(firstPartition)
	for i := 0; i < int(partitions); i++ {
		if cur > 0 && cur%n == 0 {
			shift++
		}
		first := (cur + startIndex) % n
		replicas := []int32{brokers[first]}
		for j := 0; j < rf-1; j++ {
			replicas = append(replicas, brokers[(first+1+(shift+j)%(n-1))%n])
		}
		out[int32(cur)] = replicas
		cur++
	}
	return out
}

// validTopic is Kafka's Topic.validate; "" means valid.
func validTopic(name string) string {
	switch {
	case name == "":
		return "Topic name is illegal, it can't be empty"
	case name == "." || name == "..":
		return "Topic name cannot be \".\" or \"..\""
	case len(name) > 249:
		return "Topic name is illegal, it can't be longer than 249 characters"
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return "Topic name \"" + name + "\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"
		}
	}
	return ""
}

func liveBrokerIDs(ctx context.Context, st Store) ([]int32, error) {
	kids, err := st.Children(ctx, BrokerIDsPath, false)
	if err != nil {
		return nil, err
	}
	var out []int32
	for _, k := range kids {
		if id, err := strconv.ParseInt(k, 10, 32); err == nil {
			out = append(out, int32(id))
		}
	}
	slices.Sort(out)
	return out, nil
}

func hasLeaders(img *image.Image, topic string, n int) bool {
	t, ok := img.TopicByName(topic)
	if !ok || t.NumPartitions() < n {
		return false
	}
	for _, p := range t.Partitions() {
		if p.Leader < 0 {
			return false
		}
	}
	return true
}

// awaitCache waits until done(cache) or timeoutMs passes (then expired
// runs). A timeout <= 0 answers at once, as Kafka does.
func (b *Broker) awaitCache(ctx context.Context, timeoutMs int32, done func(*image.Image) bool, expired func()) {
	if timeoutMs <= 0 {
		return
	}
	deadline := time.NewTimer(time.Duration(timeoutMs) * time.Millisecond)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !done(b.Image()) {
		select {
		case <-tick.C:
		case <-deadline.C:
			expired()
			return
		case <-ctx.Done():
			expired()
			return
		}
	}
}

// DeleteTopics marks topics for deletion under /admin/delete_topics; the
// controller deletes them and tells the brokers. A request naming more
// topics than Config.MaxRecordsPerUserOp marks none and answers every one
// POLICY_VIOLATION (no message, as Kafka's DeleteTopics error response).
func (b *Broker) DeleteTopics(ctx context.Context, req *kmsg.DeleteTopicsRequest) (*kmsg.DeleteTopicsResponse, error) {
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	if len(req.TopicNames)+len(req.Topics) > b.cfg.MaxRecordsPerUserOp {
		// One record per deleted topic in KRaft mode; kraftd counts the
		// entries asked for, before a single ZooKeeper read.
		for _, name := range req.TopicNames {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.ErrorCode = kmsg.StringPtr(name), errTooLarge.Code
			resp.Topics = append(resp.Topics, rt)
		}
		for _, t := range req.Topics {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.TopicID, rt.ErrorCode = t.Topic, t.TopicID, errTooLarge.Code
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
	st := b.Store()
	names := slices.Clone(req.TopicNames)
	for _, t := range req.Topics {
		if t.Topic != nil {
			names = append(names, *t.Topic)
		} else if tp, ok := b.Image().TopicByID(records.UUID(t.TopicID)); ok {
			names = append(names, tp.Name())
		} else {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.TopicID, rt.ErrorCode = t.TopicID, kerr.UnknownTopicID.Code
			resp.Topics = append(resp.Topics, rt)
		}
	}
	var pending []string
	for _, name := range names {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		n := name
		rt.Topic = &n
		if t, ok := b.Image().TopicByName(name); ok {
			rt.TopicID = t.ID()
		}
		if _, ok, err := st.Exists(ctx, TopicPath(name), false); err != nil {
			return nil, err
		} else if !ok {
			rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		} else if _, err := st.Create(ctx, DeleteTopicPath(name), nil, Persistent); err != nil && !errors.Is(err, ErrNodeExists) {
			return nil, err
		} else {
			pending = append(pending, name)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	gone := func(img *image.Image) bool {
		for _, n := range pending {
			if _, ok := img.TopicByName(n); ok {
				return false
			}
		}
		return true
	}
	b.awaitCache(ctx, req.TimeoutMillis, gone, func() {
		for i := range resp.Topics {
			if rt := &resp.Topics[i]; rt.ErrorCode == 0 && rt.Topic != nil {
				if _, ok := b.Image().TopicByName(*rt.Topic); ok {
					rt.ErrorCode = kerr.RequestTimedOut.Code
				}
			}
		}
	})
	return resp, nil
}

// CreatePartitions adds partitions by rewriting the topic znode with a
// conditional setData; the controller's data watch initialises them.
//
// Every topic is checked first (ZkAdminManager.createPartitions' rules)
// and its new partitions counted against Config.MaxRecordsPerUserOp, as
// in CreateTopics, before any is placed or written: past the cap every
// topic is answered POLICY_VIOLATION, validate-only too. Topics are then
// added one by one, each re-read, so a topic named twice is handled as
// Kafka's ZooKeeper-era broker handled it: in order.
func (b *Broker) CreatePartitions(ctx context.Context, req *kmsg.CreatePartitionsRequest) (*kmsg.CreatePartitionsResponse, error) {
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	st := b.Store()
	brokers, err := liveBrokerIDs(ctx, st)
	if err != nil {
		return nil, err
	}
	budget := recordBudget(b.cfg.MaxRecordsPerUserOp)
	for _, t := range req.Topics {
		if _, e, _ := b.checkPartitions(ctx, st, t, brokers, &budget); e == errTooLarge {
			return excessivelyLargePartitions(req), nil
		}
	}
	want := map[string]int32{}
	for _, t := range req.Topics {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = t.Topic
		if e, msg := b.addPartitions(ctx, st, req.ValidateOnly, t, brokers); e != nil {
			setErr(&rt.ErrorCode, &rt.ErrorMessage, e, msg)
		} else if !req.ValidateOnly {
			want[t.Topic] = t.Count
		}
		resp.Topics = append(resp.Topics, rt)
	}
	b.awaitCache(ctx, req.TimeoutMillis, func(img *image.Image) bool {
		for t, n := range want {
			if !hasLeaders(img, t, int(n)) {
				return false
			}
		}
		return true
	}, func() {
		for i := range resp.Topics {
			rt := &resp.Topics[i]
			if n, ok := want[rt.Topic]; ok && !hasLeaders(b.Image(), rt.Topic, int(n)) {
				rt.ErrorCode = kerr.RequestTimedOut.Code
			}
		}
	})
	return resp, nil
}

// partitionsPlan is a topic CreatePartitions may grow: its assignment as
// read, at which znode version.
type partitionsPlan struct {
	a       TopicAssignment
	version int32
}

// checkPartitions reads and validates one topic of a CreatePartitions and
// takes its new partitions from budget (errTooLarge when they do not fit),
// allocating nothing of the requested size: Kafka's count checks, the
// budget, then a manual assignment's entries (known brokers, one per new
// partition, no broker twice, the replication factor of partition 0).
func (b *Broker) checkPartitions(ctx context.Context, st Store, t kmsg.CreatePartitionsRequestTopic, brokers []int32,
	budget *recordBudget) (partitionsPlan, *kerr.Error, string) {
	data, stat, err := st.Get(ctx, TopicPath(t.Topic), false)
	if errors.Is(err, ErrNoNode) {
		return partitionsPlan{}, kerr.UnknownTopicOrPartition, "The topic '" + t.Topic + "' does not exist."
	} else if err != nil {
		return partitionsPlan{}, kerr.UnknownServerError, err.Error()
	}
	if _, ok, _ := st.Exists(ctx, DeleteTopicPath(t.Topic), false); ok {
		return partitionsPlan{}, kerr.InvalidTopicException, "The topic is queued for deletion."
	}
	a, err := DecodeTopic(t.Topic, data)
	if err != nil {
		return partitionsPlan{}, kerr.UnknownServerError, err.Error()
	}
	cur := int32(len(a.Partitions))
	switch {
	case t.Count < cur:
		return partitionsPlan{}, kerr.InvalidPartitions, fmt.Sprintf("Topic currently has %d partitions, which is higher than the requested %d.", cur, t.Count)
	case t.Count == cur:
		return partitionsPlan{}, kerr.InvalidPartitions, fmt.Sprintf("Topic already has %d partitions.", cur)
	}
	if !budget.take(int(t.Count - cur)) {
		return partitionsPlan{}, errTooLarge, excessivelyLargeMessage
	}
	p0, ok := a.Partitions[0]
	if !ok || len(p0) == 0 {
		// AdminZkClient.createNewPartitionsAssignment's AdminOperationException.
		return partitionsPlan{}, kerr.UnknownServerError, "Unexpected existing replica assignment for topic '" + t.Topic + "', partition id 0 is missing."
	}
	if len(t.Assignment) > 0 {
		for _, as := range t.Assignment {
			for _, r := range as.Replicas {
				if _, ok := slices.BinarySearch(brokers, r); !ok {
					return partitionsPlan{}, kerr.InvalidReplicaAssignment, fmt.Sprintf("Unknown broker(s) in replica assignment: %d.", r)
				}
			}
		}
		if int64(len(t.Assignment)) != int64(t.Count-cur) {
			return partitionsPlan{}, kerr.InvalidReplicaAssignment, "Increasing the number of partitions by " +
				strconv.Itoa(int(t.Count-cur)) + " but " + strconv.Itoa(len(t.Assignment)) + " assignments provided."
		}
		for i, as := range t.Assignment {
			p := cur + int32(i)
			if e, msg := checkReplicas(p, as.Replicas, brokers); e != nil {
				return partitionsPlan{}, e, msg
			}
			if len(as.Replicas) != len(p0) {
				return partitionsPlan{}, kerr.InvalidReplicaAssignment, fmt.Sprintf("Inconsistent replication factor between partitions, "+
					"partition 0 has %d while partitions [%d] have replication factors [%d], respectively.", len(p0), p, len(as.Replicas))
			}
		}
	} else if len(p0) > len(brokers) {
		return partitionsPlan{}, kerr.InvalidReplicationFactor, fmt.Sprintf("Replication factor: %d larger than available brokers: %d.", len(p0), len(brokers))
	}
	return partitionsPlan{a: a, version: stat.Version}, nil, ""
}

func (b *Broker) addPartitions(ctx context.Context, st Store, validateOnly bool, t kmsg.CreatePartitionsRequestTopic, brokers []int32) (*kerr.Error, string) {
	unbounded := recordBudget(math.MaxInt)
	plan, e, msg := b.checkPartitions(ctx, st, t, brokers, &unbounded)
	if e != nil || validateOnly {
		return e, msg
	}
	a, cur := plan.a, int32(len(plan.a.Partitions))
	if len(t.Assignment) > 0 {
		for i, as := range t.Assignment {
			a.Partitions[cur+int32(i)] = slices.Clone(as.Replicas)
		}
	} else {
		start := max(slices.Index(brokers, a.Partitions[0][0]), 0)
		maps.Copy(a.Partitions, assignReplicas(brokers, t.Count-cur, len(a.Partitions[0]), cur, start, 0))
	}
	if _, err := st.Set(ctx, TopicPath(t.Topic), EncodeTopic(a), plan.version); err != nil {
		return kerr.UnknownServerError, err.Error()
	}
	return nil, ""
}

// DefaultMaxRecordsPerUserOp is Config.MaxRecordsPerUserOp's default:
// kraftd's bound on one admin request, well above anything ZooKeeper-era
// Kafka (which had none) was asked for in practice. It is not the KRaft
// controller's default (Kafka's MAX_RECORDS_PER_USER_OP, 10000): a
// zk-legacy broker refusing what a ZooKeeper-era broker accepted would be
// a divergence of its own.
const DefaultMaxRecordsPerUserOp = 200000

const excessivelyLargeMessage = "Unable to perform excessively large batch operation."

// errTooLarge marks a request over Config.MaxRecordsPerUserOp; the admin
// requests return no other POLICY_VIOLATION.
var errTooLarge = kerr.PolicyViolation

// recordBudget is how many more records (KRaft mode's count) one admin
// request may still ask for, as the KRaft controller's budget: checks take
// a topic's count from it before anything of that size is built.
type recordBudget int

// take reserves n records and reports whether they fit.
func (b *recordBudget) take(n int) bool {
	if n < 0 || n > int(*b) {
		return false
	}
	*b -= recordBudget(n)
	return true
}

// excessivelyLargeCreate is CreateTopicsRequest.getErrorResponse with
// POLICY_VIOLATION and Kafka's message for every topic.
func excessivelyLargeCreate(req *kmsg.CreateTopicsRequest) *kmsg.CreateTopicsResponse {
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = t.Topic, -1, -1
		setErr(&rt.ErrorCode, &rt.ErrorMessage, errTooLarge, excessivelyLargeMessage)
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func excessivelyLargePartitions(req *kmsg.CreatePartitionsRequest) *kmsg.CreatePartitionsResponse {
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = t.Topic
		setErr(&rt.ErrorCode, &rt.ErrorMessage, errTooLarge, excessivelyLargeMessage)
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
