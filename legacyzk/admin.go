package legacyzk

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
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
	var waitFor []*kmsg.CreateTopicsResponseTopic
	for _, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = t.Topic, -1, -1
		if seen[t.Topic] > 1 {
			setErr(&rt.ErrorCode, &rt.ErrorMessage, kerr.InvalidRequest, "duplicate topic name in the request")
		} else {
			b.createOne(ctx, st, req.ValidateOnly, t, brokers, &rt)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	for i := range resp.Topics {
		if resp.Topics[i].ErrorCode == 0 && !req.ValidateOnly {
			waitFor = append(waitFor, &resp.Topics[i])
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

// createOne validates and writes one topic; errors land in rt.
func (b *Broker) createOne(ctx context.Context, st Store, validateOnly bool, t kmsg.CreateTopicsRequestTopic,
	brokers []int32, rt *kmsg.CreateTopicsResponseTopic) {
	if err := validTopic(t.Topic); err != "" {
		setErr(&rt.ErrorCode, &rt.ErrorMessage, kerr.InvalidTopicException, err)
		return
	}
	assignment, kerrCode, msg := b.assignment(t, brokers)
	if kerrCode != nil {
		setErr(&rt.ErrorCode, &rt.ErrorMessage, kerrCode, msg)
		return
	}
	if _, ok, err := st.Exists(ctx, TopicPath(t.Topic), false); err != nil || ok {
		if err != nil {
			setErr(&rt.ErrorCode, &rt.ErrorMessage, kerr.UnknownServerError, err.Error())
		} else {
			setErr(&rt.ErrorCode, &rt.ErrorMessage, kerr.TopicAlreadyExists, "Topic '"+t.Topic+"' already exists.")
		}
		return
	}
	var id records.UUID
	_, _ = rand.Read(id[:])
	rt.NumPartitions, rt.ReplicationFactor = int32(len(assignment)), int16(len(assignment[0]))
	if validateOnly {
		return
	}
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

// assignment returns the replica assignment of a new topic: the manual one
// if given, else Kafka's rack-unaware placement.
func (b *Broker) assignment(t kmsg.CreateTopicsRequestTopic, brokers []int32) (map[int32][]int32, *kerr.Error, string) {
	if len(t.ReplicaAssignment) > 0 {
		if t.NumPartitions != -1 || t.ReplicationFactor != -1 {
			return nil, kerr.InvalidRequest, "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time."
		}
		out := map[int32][]int32{}
		for _, ra := range t.ReplicaAssignment {
			out[ra.Partition] = slices.Clone(ra.Replicas)
		}
		return out, nil, ""
	}
	n, rf := t.NumPartitions, t.ReplicationFactor
	if n == -1 {
		n = b.cfg.NumPartitions
	}
	if rf == -1 {
		rf = b.cfg.DefaultReplicationFactor
	}
	switch {
	case n <= 0:
		return nil, kerr.InvalidPartitions, "Number of partitions must be larger than 0."
	case rf <= 0:
		return nil, kerr.InvalidReplicationFactor, "Replication factor must be larger than 0."
	case int(rf) > len(brokers):
		return nil, kerr.InvalidReplicationFactor, fmt.Sprintf("Replication factor: %d larger than available brokers: %d.", rf, len(brokers))
	}
	rng := mrand.New(mrand.NewPCG(uint64(time.Now().UnixNano()), uint64(b.cfg.NodeID)))
	return assignReplicas(brokers, n, int(rf), 0, rng.IntN(len(brokers)), rng.IntN(len(brokers))), nil, ""
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
// controller deletes them and tells the brokers.
func (b *Broker) DeleteTopics(ctx context.Context, req *kmsg.DeleteTopicsRequest) (*kmsg.DeleteTopicsResponse, error) {
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
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
func (b *Broker) CreatePartitions(ctx context.Context, req *kmsg.CreatePartitionsRequest) (*kmsg.CreatePartitionsResponse, error) {
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	st := b.Store()
	brokers, err := liveBrokerIDs(ctx, st)
	if err != nil {
		return nil, err
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

func (b *Broker) addPartitions(ctx context.Context, st Store, validateOnly bool, t kmsg.CreatePartitionsRequestTopic, brokers []int32) (*kerr.Error, string) {
	data, stat, err := st.Get(ctx, TopicPath(t.Topic), false)
	if errors.Is(err, ErrNoNode) {
		return kerr.UnknownTopicOrPartition, "The topic '" + t.Topic + "' does not exist."
	} else if err != nil {
		return kerr.UnknownServerError, err.Error()
	}
	if _, ok, _ := st.Exists(ctx, DeleteTopicPath(t.Topic), false); ok {
		return kerr.InvalidTopicException, "The topic is queued for deletion."
	}
	a, err := DecodeTopic(t.Topic, data)
	if err != nil {
		return kerr.UnknownServerError, err.Error()
	}
	cur := int32(len(a.Partitions))
	switch {
	case t.Count < cur:
		return kerr.InvalidPartitions, fmt.Sprintf("Topic currently has %d partitions, which is higher than the requested %d.", cur, t.Count)
	case t.Count == cur:
		return kerr.InvalidPartitions, fmt.Sprintf("Topic already has %d partitions.", cur)
	}
	added, e, msg := newPartitions(t, a, cur, brokers)
	if e != nil || validateOnly {
		return e, msg
	}
	for p, r := range added {
		a.Partitions[p] = r
	}
	if _, err := st.Set(ctx, TopicPath(t.Topic), EncodeTopic(a), stat.Version); err != nil {
		return kerr.UnknownServerError, err.Error()
	}
	return nil, ""
}

func newPartitions(t kmsg.CreatePartitionsRequestTopic, a TopicAssignment, cur int32, brokers []int32) (map[int32][]int32, *kerr.Error, string) {
	rf := len(a.Partitions[0])
	if len(t.Assignment) > 0 {
		if int32(len(t.Assignment)) != t.Count-cur {
			return nil, kerr.InvalidReplicaAssignment, "Increasing the number of partitions by " +
				strconv.Itoa(int(t.Count-cur)) + " but " + strconv.Itoa(len(t.Assignment)) + " assignments provided."
		}
		out := map[int32][]int32{}
		for i, as := range t.Assignment {
			out[cur+int32(i)] = slices.Clone(as.Replicas)
		}
		return out, nil, ""
	}
	if rf > len(brokers) {
		return nil, kerr.InvalidReplicationFactor, fmt.Sprintf("Replication factor: %d larger than available brokers: %d.", rf, len(brokers))
	}
	start := slices.Index(brokers, a.Partitions[0][0])
	if start < 0 {
		start = 0
	}
	return assignReplicas(brokers, t.Count-cur, rf, cur, start, 0), nil, ""
}
