package controller

// CreateTopics, API key 19, versions 0-7 (v1 ValidateOnly and ErrorMessage,
// v5 (KIP-525) NumPartitions/ReplicationFactor/Configs in the response,
// v7 (KIP-516) TopicID). Brokers forward it here (KIP-590).
//
// Per topic, in Kafka's order (ControllerApis.createTopics then
// ReplicationControlManager.createTopics):
//
//   - first, for the whole request: more than 10000 partitions over its
//     topics (Kafka's MAX_PARTITIONS_PER_BATCH, not configurable; names
//     given twice not counted) answers every topic POLICY_VIOLATION
//     "Excessively large number of partitions per request.", ValidateOnly
//     or not (ReplicationControlManager.validateTotalNumberOfPartitions);
//   - a name given twice: INVALID_REQUEST "Duplicate topic name.";
//     __cluster_metadata: INVALID_REQUEST;
//   - Topic.validate: INVALID_TOPIC_EXCEPTION "Topic name is invalid: ...";
//     a name equal to an existing one once '.' and '_' are unified:
//     INVALID_TOPIC_EXCEPTION "... collides with existing topic: ...";
//   - existing name: TOPIC_ALREADY_EXISTS;
//   - a null config value, a name that is no topic config, or a value its
//     type or validator refuses: INVALID_CONFIG with Kafka's message
//     (image.ValidateTopicConfig);
//   - manual assignments need NumPartitions and ReplicationFactor -1
//     (INVALID_REQUEST), partitions 0..n-1 once each, registered distinct
//     brokers, equal sizes, and at least one active broker per partition
//     (INVALID_REPLICA_ASSIGNMENT);
//   - otherwise ReplicationFactor 0 or < -1: INVALID_REPLICATION_FACTOR,
//     NumPartitions 0 or < -1: INVALID_PARTITIONS, -1 takes the default,
//     and the striped placer spreads replicas over usable brokers
//     (INVALID_REPLICATION_FACTOR "Unable to replicate the partition N
//     time(s): ..." when it cannot);
//   - the records of the topics that pass (topic, configs, partitions)
//     count against Config.MaxRecordsPerUserOp, Kafka's BoundedList of
//     MAX_RECORDS_PER_USER_OP: past it the whole request is answered
//     POLICY_VIOLATION "Unable to perform excessively large batch
//     operation." for every topic, ValidateOnly or not (Kafka's
//     BoundedListTooLongException is not caught per topic here, and
//     EventHandlerExceptionInfo maps it to that PolicyViolationException).
//     With the default cap (10000) a topic of 9,999 partitions and no
//     configs is exactly 10,000 records and passes; 10,000 partitions
//     (10,001 records) are refused with that message, 10,001 with the
//     partitions message above. kraftd counts a topic's records before
//     placing anything (NumPartitions 2147483647 costs nothing) and, as
//     Kafka, after validating every manual assignment entry (they are the
//     request's own).
//
// A created topic is a TopicRecord, its ConfigRecords, then one
// PartitionRecord per partition with ISR = the active replicas, leader =
// the first of them, epochs 0. ValidateOnly writes nothing. The response
// lists the topic's configs as the overrides given (Kafka lists every
// effective config; kraftd has no config schema).

import (
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/metadata/records"
)

// apiError is a Kafka error code with its optional message.
type apiError struct {
	code int16
	msg  *string
}

func errf(e *kerr.Error, format string, args ...any) *apiError {
	return &apiError{code: e.Code, msg: kmsg.StringPtr(fmt.Sprintf(format, args...))}
}

// clusterMetadataTopic is the name of the metadata log's topic.
const clusterMetadataTopic = "__cluster_metadata"

// configSourceDynamicTopic is DescribeConfigs' DYNAMIC_TOPIC_CONFIG source.
const configSourceDynamicTopic = 1

func (c *core) createTopics(req *kmsg.CreateTopicsRequest) Result {
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	resp.SetVersion(req.Version)
	counts := map[string]int{}
	for _, t := range req.Topics {
		counts[t.Topic]++
	}
	if c.requestedPartitions(req, counts) > maxPartitionsPerCreate {
		return Result{Response: errorResponseMessage(req, kerr.PolicyViolation.Code, kmsg.StringPtr(tooManyPartitionsMessage))}
	}
	var recs []records.Record
	budget := recordBudget(c.cfg.MaxRecordsPerUserOp)
	created := map[string]bool{}
	for _, t := range req.Topics {
		if created[t.Topic] {
			continue // a duplicate's error was already added
		}
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		var err *apiError
		switch {
		case counts[t.Topic] > 1:
			err = errf(kerr.InvalidRequest, "Duplicate topic name.")
		case t.Topic == clusterMetadataTopic:
			err = errf(kerr.InvalidRequest, "Creation of internal topic %s is prohibited.", clusterMetadataTopic)
		default:
			left := budget
			recs, err = c.createTopic(t, &rt, recs, &budget)
			if err != nil {
				budget = left // a topic that fails writes nothing
			}
		}
		if err == errExcessivelyLarge {
			return excessivelyLarge(req)
		}
		created[t.Topic] = true
		if err != nil {
			rt.ErrorCode, rt.ErrorMessage = err.code, err.msg
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if req.ValidateOnly {
		recs = nil
	}
	return Result{Records: recs, Response: resp}
}

// maxPartitionsPerCreate is Kafka's MAX_PARTITIONS_PER_BATCH: the most
// partitions one CreateTopics may ask for, over all its topics.
const maxPartitionsPerCreate = 10_000

// tooManyPartitionsMessage is Kafka's message for a CreateTopics over
// maxPartitionsPerCreate.
const tooManyPartitionsMessage = "Excessively large number of partitions per request."

// requestedPartitions is how many partitions req asks for, counted as
// Kafka's validateTotalNumberOfPartitions does: a topic's manual
// assignments, else its NumPartitions, num.partitions for -1, and nothing
// for an invalid count (its own error comes later). Duplicated names are
// not counted: Kafka's ControllerApis takes them out before the controller
// sees the request.
func (c *core) requestedPartitions(req *kmsg.CreateTopicsRequest, counts map[string]int) int64 {
	var total int64
	for _, t := range req.Topics {
		switch {
		case counts[t.Topic] > 1:
		case len(t.ReplicaAssignment) > 0:
			total += int64(len(t.ReplicaAssignment))
		case t.NumPartitions == -1:
			total += int64(c.cfg.DefaultNumPartitions)
		case t.NumPartitions > 0:
			total += int64(t.NumPartitions)
		}
	}
	return total
}

// createTopic validates one topic and appends its records; it takes them
// from budget before building any (errExcessivelyLarge when they do not fit).
func (c *core) createTopic(t kmsg.CreateTopicsRequestTopic, rt *kmsg.CreateTopicsResponseTopic,
	recs []records.Record, budget *recordBudget) ([]records.Record, *apiError) {
	img := c.pending.img
	if err := c.validateNewTopicName(t.Topic); err != nil {
		return recs, err
	}
	if _, exists := img.TopicByName(t.Topic); exists {
		return recs, errf(kerr.TopicAlreadyExists, "Topic '%s' already exists.", t.Topic)
	}
	if err := checkConfigs(t.Configs); err != nil {
		return recs, err
	}
	cfgs := sortedConfigs(t.Configs)
	assignments, err := c.assignReplicas(t, 1+len(cfgs), budget)
	if err != nil {
		return recs, err
	}
	id := c.newTopicID()
	rt.TopicID, rt.NumPartitions = id, int32(len(assignments))
	rt.ReplicationFactor = int16(len(assignments[0]))
	recs = append(recs, records.Record{Message: &records.TopicRecord{Name: t.Topic, TopicID: id}})
	for _, cfg := range cfgs {
		recs = append(recs, records.Record{Message: &records.ConfigRecord{
			ResourceType: image.ConfigTopic, ResourceName: t.Topic, Name: cfg.Name, Value: cfg.Value}})
		rc := kmsg.NewCreateTopicsResponseTopicConfig()
		rc.Name, rc.Value, rc.Source = cfg.Name, cfg.Value, configSourceDynamicTopic
		rt.Configs = append(rt.Configs, rc)
	}
	for i, replicas := range assignments {
		recs = append(recs, c.partitionRecord(id, int32(i), replicas))
	}
	return recs, nil
}

// partitionRecord is a new partition: ISR = the active replicas (never
// empty; callers check), led by the first of them, epochs 0.
func (c *core) partitionRecord(topicID records.UUID, id int32, replicas []int32) records.Record {
	isr := activeOf(c.pending.img, replicas)
	return records.Record{Message: &records.PartitionRecord{
		PartitionID: id, TopicID: topicID, Replicas: replicas, ISR: isr,
		RemovingReplicas: []int32{}, AddingReplicas: []int32{},
		Leader: isr[0], LeaderEpoch: 0, PartitionEpoch: 0,
	}}
}

func activeOf(img *image.Image, replicas []int32) []int32 {
	out := make([]int32, 0, len(replicas))
	for _, r := range replicas {
		if isActive(img, r) {
			out = append(out, r)
		}
	}
	return out
}

// validateNewTopicName is Kafka's Topic.validate plus the collision check
// against existing topics whose names differ only in '.' versus '_'.
func (c *core) validateNewTopicName(name string) *apiError {
	if reason := invalidTopicReason(name); reason != "" {
		return errf(kerr.InvalidTopicException, "Topic name is invalid: %s", reason)
	}
	if other, ok := collidingTopic(c.pending.img, name); ok {
		return errf(kerr.InvalidTopicException, "Topic '%s' collides with existing topic: %s", name, other)
	}
	return nil
}

// maxCollisionVariants bounds the names collidingTopic looks up: a name with
// more '.' and '_' than that (2^12 spellings) is compared with every topic.
const maxCollisionVariants = 1 << 12

// collidingTopic returns an existing topic, other than name itself, whose
// name equals name once '.' and '_' are unified. Kafka keeps a map of the
// unified names (topicsWithCollisionChars); kraftd looks up the other
// spellings of name instead, 2^k of them for k such characters, when that
// is fewer than the topics, so a create costs the same whatever the cluster
// holds (it compared name with every topic: issue 17). Otherwise, and for
// a hostile name of up to 249 such characters, it compares with every
// topic, as before.
func collidingTopic(img *image.Image, name string) (string, bool) {
	var at []int
	for i := 0; i < len(name); i++ {
		if name[i] == '.' || name[i] == '_' {
			at = append(at, i)
		}
	}
	if len(at) == 0 {
		return "", false
	}
	if len(at) < 31 && 1<<len(at) <= min(img.NumTopics(), maxCollisionVariants) {
		b := []byte(name)
		for mask := range 1 << len(at) {
			for i, pos := range at {
				b[pos] = "._"[mask>>i&1]
			}
			if v := string(b); v != name {
				if _, ok := img.TopicByName(v); ok {
					return v, true
				}
			}
		}
		return "", false
	}
	unified := unifyCollisionChars(name)
	for t := range img.Topics() {
		if t.Name() != name && strings.ContainsAny(t.Name(), "._") && unifyCollisionChars(t.Name()) == unified {
			return t.Name(), true
		}
	}
	return "", false
}

func unifyCollisionChars(s string) string { return strings.ReplaceAll(s, ".", "_") }

// maxTopicNameLength is Kafka's Topic.MAX_NAME_LENGTH.
const maxTopicNameLength = 249

func invalidTopicReason(name string) string {
	switch {
	case name == "":
		return "the empty string is not allowed"
	case name == ".":
		return "'.' is not allowed"
	case name == "..":
		return "'..' is not allowed"
	case len(name) > maxTopicNameLength:
		return fmt.Sprintf("the length of '%s' is longer than the max allowed length %d", name, maxTopicNameLength)
	}
	for i := 0; i < len(name); i++ {
		b := name[i]
		if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '.' || b == '_' || b == '-') {
			return fmt.Sprintf("'%s' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'", name)
		}
	}
	return ""
}

func checkConfigs(cfgs []kmsg.CreateTopicsRequestTopicConfig) *apiError {
	var nulls []string
	for _, cfg := range cfgs {
		if cfg.Value == nil {
			nulls = append(nulls, cfg.Name)
		}
	}
	if len(nulls) > 0 {
		return errf(kerr.InvalidConfig, "Null value not supported for topic configs: %s", strings.Join(nulls, ","))
	}
	for _, cfg := range sortedConfigs(cfgs) {
		if why := image.ValidateTopicConfig(cfg.Name, *cfg.Value); why != "" {
			return errf(kerr.InvalidConfig, "%s", why)
		}
	}
	return nil
}

// sortedConfigs orders configs by name; a name given twice keeps its last
// value, as Kafka's map does.
func sortedConfigs(cfgs []kmsg.CreateTopicsRequestTopicConfig) []kmsg.CreateTopicsRequestTopicConfig {
	last := map[string]kmsg.CreateTopicsRequestTopicConfig{}
	for _, cfg := range cfgs {
		last[cfg.Name] = cfg
	}
	out := make([]kmsg.CreateTopicsRequestTopicConfig, 0, len(last))
	for _, cfg := range last {
		out = append(out, cfg)
	}
	slices.SortFunc(out, func(a, b kmsg.CreateTopicsRequestTopicConfig) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// assignReplicas returns the replica list of every new partition, from the
// request's manual assignment or from the placer, once the topic's records
// (fixed of them besides one per partition) are taken from budget.
func (c *core) assignReplicas(t kmsg.CreateTopicsRequestTopic, fixed int, budget *recordBudget) ([][]int32, *apiError) {
	if len(t.ReplicaAssignment) > 0 {
		return c.manualAssignment(t, fixed, budget)
	}
	switch {
	case t.ReplicationFactor < -1 || t.ReplicationFactor == 0:
		return nil, errf(kerr.InvalidReplicationFactor, "Replication factor must be larger than 0, or -1 to use the default value.")
	case t.NumPartitions < -1 || t.NumPartitions == 0:
		return nil, errf(kerr.InvalidPartitions, "Number of partitions was set to an invalid non-positive value.")
	}
	count, rf := t.NumPartitions, t.ReplicationFactor
	if count == -1 {
		count = c.cfg.DefaultNumPartitions
	}
	if rf == -1 {
		rf = c.cfg.DefaultReplicationFactor
	}
	return c.place(int(count), int(rf), fixed, budget)
}

// place runs the striped placer over the usable brokers. The replication
// factor is checked against them, and count+fixed records taken from
// budget, before anything of size count is allocated.
func (c *core) place(count, rf, fixed int, budget *recordBudget) ([][]int32, *apiError) {
	p := newStripedPlacer(c.rng, c.usableBrokers())
	if err := p.check(rf); err != nil {
		return nil, errf(kerr.InvalidReplicationFactor, "Unable to replicate the partition %d time(s): %s", rf, err)
	}
	if !budget.take(fixed + count) {
		return nil, errExcessivelyLarge
	}
	out := p.place(count, rf)
	for _, replicas := range out {
		if len(activeOf(c.pending.img, replicas)) == 0 {
			return nil, errf(kerr.InvalidReplicationFactor,
				"Unable to replicate the partition %d time(s): All brokers are currently fenced or in controlled shutdown.", rf)
		}
	}
	return out, nil
}

// usableBrokers are the registered brokers not shutting down.
func (c *core) usableBrokers() []usableBroker {
	var out []usableBroker
	for _, b := range c.pending.img.Brokers() {
		if s, ok := c.sessions.byID[b.ID]; b.InControlledShutdown || ok && s.shuttingDown() {
			continue
		}
		out = append(out, usableBroker{id: b.ID, rack: b.Rack, fenced: b.Fenced})
	}
	return out
}

func (c *core) manualAssignment(t kmsg.CreateTopicsRequestTopic, fixed int, budget *recordBudget) ([][]int32, *apiError) {
	if t.ReplicationFactor != -1 {
		return nil, errf(kerr.InvalidRequest, "A manual partition assignment was specified, but replication factor was not set to -1.")
	}
	if t.NumPartitions != -1 {
		return nil, errf(kerr.InvalidRequest, "A manual partition assignment was specified, but numPartitions was not set to -1.")
	}
	byID := make(map[int32][]int32, len(t.ReplicaAssignment))
	rf := -1
	for _, a := range t.ReplicaAssignment {
		if _, dup := byID[a.Partition]; dup {
			return nil, errf(kerr.InvalidReplicaAssignment, "Found multiple manual partition assignments for partition %d", a.Partition)
		}
		if err := c.validateManualAssignment(a.Replicas, rf); err != nil {
			return nil, err
		}
		rf = len(a.Replicas)
		if len(activeOf(c.pending.img, a.Replicas)) == 0 {
			return nil, errf(kerr.InvalidReplicaAssignment,
				"All brokers specified in the manual partition assignment for partition %d are fenced or in controlled shutdown.", a.Partition)
		}
		byID[a.Partition] = slices.Clone(a.Replicas)
	}
	for i := range int32(len(byID)) {
		if _, ok := byID[i]; !ok {
			return nil, errf(kerr.InvalidReplicaAssignment, "partitions should be a consecutive 0-based integer sequence")
		}
	}
	// Kafka adds the topic's records once every entry has passed; byID
	// holds the request's own lists, so nothing was allocated past it.
	if !budget.take(fixed + len(byID)) {
		return nil, errExcessivelyLarge
	}
	out := make([][]int32, len(byID))
	for i := range out {
		out[i] = byID[int32(i)]
	}
	return out, nil
}

// validateManualAssignment is Kafka's validateManualPartitionAssignment; rf
// is -1 when any size is allowed. Kafka sorts the list and reports the
// first id, in ascending order, that is not registered or is repeated;
// this finds the same id in one pass without copying the (untrusted, up to
// a frame long) list, with memory bounded by the registered brokers.
func (c *core) validateManualAssignment(replicas []int32, rf int) *apiError {
	if len(replicas) == 0 {
		return errf(kerr.InvalidReplicaAssignment, "The manual partition assignment includes an empty replica list.")
	}
	img := c.pending.img
	bad, repeated, found := int32(0), false, false
	note := func(id int32, twice bool) {
		if !found || id < bad {
			bad, repeated, found = id, twice, true
		}
	}
	seen := make(map[int32]struct{}, min(len(replicas), 64))
	for _, id := range replicas {
		if _, ok := img.Broker(id); !ok {
			note(id, false)
		} else if _, twice := seen[id]; twice {
			note(id, true)
		} else {
			seen[id] = struct{}{}
		}
	}
	switch {
	case found && repeated:
		return errf(kerr.InvalidReplicaAssignment,
			"The manual partition assignment includes the broker %d more than once.", bad)
	case found:
		return errf(kerr.InvalidReplicaAssignment,
			"The manual partition assignment includes broker %d, but no such broker is registered.", bad)
	}
	if rf >= 0 && len(replicas) != rf {
		return errf(kerr.InvalidReplicaAssignment,
			"The manual partition assignment includes a partition with %d replica(s), but this is not consistent with previous partitions, which have %d replica(s).",
			len(replicas), rf)
	}
	return nil
}

// newTopicID draws a topic id the way Kafka's Uuid.randomUuid does: never
// a reserved id, never one whose text starts with '-', and (our addition)
// never one already in use.
func (c *core) newTopicID() records.UUID {
	for {
		var id records.UUID
		for i := 0; i < 16; i += 8 {
			v := c.rng.Uint64()
			for j := range 8 {
				id[i+j] = byte(v >> (8 * j))
			}
		}
		if id == records.ZeroUUID || id == records.OneUUID || strings.HasPrefix(id.String(), "-") {
			continue
		}
		if _, taken := c.pending.img.TopicByID(id); !taken {
			return id
		}
	}
}
