package interop

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/cmd/kraftd/app"
	"github.com/kraftd/kraftd/protocol"
)

// The version sweep: every version of every API the broker listener
// advertises in ApiVersions is sent at least once, pinned, and its answer
// checked. The sweep is driven by the advertised table, so a version or key
// added to a handler without a check here fails the test instead of
// shipping untested.

// sweepEnv is the fixture the sweepers share: a 1-controller, 1-broker
// cluster with one topic.
type sweepEnv struct {
	c        *cluster
	cl       *protocol.Client
	addr     string
	brokerID int32
	topic    string // exists, grows by one partition per CreatePartitions version
	// metadataVersion is the version of the sweepers' own Metadata polls;
	// -1 negotiates (the wire check pins one its decoder knows).
	metadataVersion int16
	// produced counts the batches the Produce sweep appended to partition
	// 0 of topic (one per advertised version, v3 first).
	produced int64
}

// sweeper checks one API at one pinned version.
type sweeper func(ctx context.Context, e *sweepEnv, v int16) error

// sweepOrder is the order keys are swept in: topics are created before the
// versions of DeleteTopics remove them.
var sweepOrder = []struct {
	key int16
	fn  sweeper
}{
	{18, sweepApiVersions},
	{3, sweepMetadata},
	{19, sweepCreateTopics},
	{37, sweepCreatePartitions},
	{32, sweepDescribeConfigs},
	{44, sweepIncrementalAlterConfigs},
	{33, sweepAlterConfigs},
	{60, sweepDescribeCluster},
	{43, sweepElectLeaders},
	{55, sweepDescribeQuorum},
	{57, sweepUpdateFeatures},
	{80, sweepAddRaftVoter},
	{81, sweepRemoveRaftVoter},
	{22, sweepInitProducerID},
	{0, sweepProduce},
	{2, sweepListOffsets},
	{23, sweepOffsetForLeaderEpoch},
	{1, sweepFetch},
	{27, sweepWriteTxnMarkers},
	{61, sweepDescribeProducers},
	{10, sweepFindCoordinator},
	{11, sweepJoinGroup},
	{14, sweepSyncGroup},
	{12, sweepHeartbeat},
	{13, sweepLeaveGroup},
	{8, sweepOffsetCommit},
	{9, sweepOffsetFetch},
	{15, sweepDescribeGroups},
	{16, sweepListGroups},
	{47, sweepOffsetDelete},
	{42, sweepDeleteGroups},
	{35, sweepDescribeLogDirs},
	{21, sweepDeleteRecords},
	{24, sweepAddPartitionsToTxn},
	{25, sweepAddOffsetsToTxn},
	{26, sweepEndTxn},
	{28, sweepTxnOffsetCommit},
	{65, sweepDescribeTransactions},
	{66, sweepListTransactions},
	{20, sweepDeleteTopics},
}

// newSweepEnv starts the KRaft sweep fixture: one controller (id 1), one
// broker (id 2), and the topic e.topic with two partitions.
func newSweepEnv(t *testing.T, clientID string) *sweepEnv {
	// One broker: __consumer_offsets and __transaction_state need
	// replication factor 1 (and the latter min ISR 1), so the group and
	// transaction APIs are swept on coordinators that exist; no initial
	// rebalance delay, so each JoinGroup version answers at once.
	c := newCluster(t, Controllers(1), Brokers(1), Override("offsets.topic.replication.factor", "1"),
		Override("group.initial.rebalance.delay.ms", "0"),
		Override("transaction.state.log.replication.factor", "1"),
		Override("transaction.state.log.min.isr", "1"), Override("transaction.state.log.num.partitions", "4"))
	waitRunning(t, c)
	return sweepFixture(t, c, 2, clientID)
}

// sweepFixture creates the sweep topic on c and returns the env that
// sends to broker brokerID.
func sweepFixture(t *testing.T, c *cluster, brokerID int32, clientID string) *sweepEnv {
	e := &sweepEnv{c: c, cl: protocol.NewClient(protocol.ClientConfig{ClientID: clientID}),
		brokerID: brokerID, topic: "sweep", metadataVersion: -1}
	t.Cleanup(func() { e.cl.Close() })
	e.addr = c.brokerAddr(e.brokerID)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := newFranzAdmin(t, c).(*franzAdmin).adm.CreateTopic(ctx, 2, 1, nil, e.topic); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the sweep topic", 10*time.Second, func() bool {
		v, err := partitionView(t, e.addr, e.topic)
		return err == nil && len(v) == 2
	})
	return e
}

func TestVersionSweep(t *testing.T) {
	runSweep(t, newSweepEnv(t, "interop-sweep"), sweepScope{})
}

// TestLegacyVersionSweep sweeps a zk-legacy broker's listener the same
// way: it serves clients with the same handlers, so it must answer every
// version it advertises just as well.
func TestLegacyVersionSweep(t *testing.T) {
	// As newSweepEnv: __consumer_offsets and __transaction_state at
	// replication factor 1 on the one broker, no initial rebalance delay.
	c, _ := newLegacyCluster(t, 1, app.Setting{Key: "offsets.topic.replication.factor", Value: "1"},
		app.Setting{Key: "group.initial.rebalance.delay.ms", Value: "0"},
		app.Setting{Key: "transaction.state.log.replication.factor", Value: "1"},
		app.Setting{Key: "transaction.state.log.min.isr", Value: "1"},
		app.Setting{Key: "transaction.state.log.num.partitions", Value: "4"})
	legacyBrokerIDs(t, c)
	const interBroker = "ZooKeeper-era inter-broker request (controller push, controlled shutdown or AlterPartition), covered by legacyzk's tests"
	runSweep(t, sweepFixture(t, c, 1, "interop-sweep-legacy"), sweepScope{
		absent: map[int16]string{55: "a zk-legacy cluster has no KRaft quorum to describe",
			80: "a zk-legacy cluster has no KRaft quorum to add voters to", 81: "a zk-legacy cluster has no KRaft quorum to remove voters from",
			57: "zk-legacy brokers do not update finalized features",
			33: "zk-legacy brokers do not alter configs yet", 44: "zk-legacy brokers do not alter configs yet"},
		notClient: map[int16]string{4: interBroker, 5: interBroker, 6: interBroker, 7: interBroker, 56: interBroker},
	})
}

// sweepScope is what a mode's broker listener advertises beyond the client
// APIs of sweepOrder, or leaves out of them. Each entry says why.
type sweepScope struct {
	absent    map[int16]string // client APIs this mode must not advertise
	notClient map[int16]string // advertised, but not client APIs (a ZooKeeper-era broker's one listener also takes controller requests)
}

// runSweep sends every advertised version of every advertised client API
// to e's broker.
func runSweep(t *testing.T, e *sweepEnv, scope sweepScope) {
	absent := scope.absent
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	advertised, err := e.cl.PeerVersions(ctx, e.addr)
	if err != nil {
		t.Fatal(err)
	}
	swept := map[int16]bool{}
	for _, s := range sweepOrder {
		rng, ok := advertised[s.key]
		why, wantAbsent := absent[s.key]
		switch {
		case ok && wantAbsent:
			t.Errorf("%s (key %d) is advertised, but %s", kmsg.NameForKey(s.key), s.key, why)
			continue
		case !ok && !wantAbsent:
			t.Errorf("%s (key %d) is not advertised; the sweep expects it", kmsg.NameForKey(s.key), s.key)
			continue
		case !ok:
			continue
		}
		swept[s.key] = true
		for v := rng[0]; v <= rng[1]; v++ {
			if err := s.fn(ctx, e, v); err != nil {
				t.Errorf("%s v%d: %v", kmsg.NameForKey(s.key), v, err)
			}
		}
		t.Logf("%s: v%d-v%d swept", kmsg.NameForKey(s.key), rng[0], rng[1])
	}
	for key, rng := range advertised {
		if why, ok := scope.notClient[key]; ok {
			t.Logf("%s v%d-v%d advertised, not swept: %s", kmsg.NameForKey(key), rng[0], rng[1], why)
			continue
		}
		if !swept[key] {
			t.Errorf("%s (key %d) v%d-v%d is advertised but no sweeper exercises it",
				kmsg.NameForKey(key), key, rng[0], rng[1])
		}
	}
}

// request sends req pinned at version v and type-checks the answer.
func request[R kmsg.Response](ctx context.Context, e *sweepEnv, req kmsg.Request, v int16) (R, error) {
	var zero R
	req.SetVersion(v)
	resp, err := e.cl.Request(ctx, e.addr, req)
	if err != nil {
		return zero, err
	}
	if resp.GetVersion() != v {
		return zero, fmt.Errorf("answered at v%d", resp.GetVersion())
	}
	r, ok := resp.(R)
	if !ok {
		return zero, fmt.Errorf("answer is %T", resp)
	}
	return r, nil
}

func sweepApiVersions(ctx context.Context, e *sweepEnv, v int16) error {
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "kraftd-interop", "1.0"
	resp, err := request[*kmsg.ApiVersionsResponse](ctx, e, req, v)
	if err != nil {
		return err
	}
	if resp.ErrorCode != 0 {
		return kafkaError(resp.ErrorCode, fmt.Errorf("ApiVersions"))
	}
	for _, k := range resp.ApiKeys {
		if k.ApiKey == 3 && k.MinVersion == 0 && k.MaxVersion >= 12 {
			return nil
		}
	}
	return fmt.Errorf("Metadata missing from %+v", resp.ApiKeys)
}

func sweepMetadata(ctx context.Context, e *sweepEnv, v int16) error {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(e.topic)
	req.Topics = []kmsg.MetadataRequestTopic{rt}
	resp, err := request[*kmsg.MetadataResponse](ctx, e, req, v)
	if err != nil {
		return err
	}
	if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != e.brokerID {
		return fmt.Errorf("brokers %+v", resp.Brokers)
	}
	if v >= 1 && resp.ControllerID != e.brokerID {
		return fmt.Errorf("controller %d, want the only broker %d", resp.ControllerID, e.brokerID)
	}
	if v >= 2 && (resp.ClusterID == nil || *resp.ClusterID != e.c.clusterID) {
		return fmt.Errorf("cluster id %v", resp.ClusterID)
	}
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) < 2 {
		return fmt.Errorf("topics %+v", resp.Topics)
	}
	if v >= 10 && resp.Topics[0].TopicID == [16]byte{} {
		return fmt.Errorf("no topic id at v%d", v)
	}
	return nil
}

func sweptTopic(v int16) string { return "sweep-created-v" + strconv.Itoa(int(v)) }

func sweepCreateTopics(ctx context.Context, e *sweepEnv, v int16) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = sweptTopic(v), 1, 1
	req.Topics = []kmsg.CreateTopicsRequestTopic{rt}
	resp, err := request[*kmsg.CreateTopicsResponse](ctx, e, req, v)
	if err != nil {
		return err
	}
	if len(resp.Topics) != 1 || resp.Topics[0].Topic != rt.Topic {
		return fmt.Errorf("topics %+v", resp.Topics)
	}
	got := resp.Topics[0]
	if got.ErrorCode != 0 {
		return kafkaError(got.ErrorCode, fmt.Errorf("CreateTopics %s", rt.Topic))
	}
	if v >= 5 && (got.NumPartitions != 1 || got.ReplicationFactor != 1) {
		return fmt.Errorf("v5+ echo: partitions %d replication %d", got.NumPartitions, got.ReplicationFactor)
	}
	if v >= 7 && got.TopicID == [16]byte{} {
		return fmt.Errorf("no topic id at v%d", v)
	}
	return nil
}

// sweepCreatePartitions grows the sweep topic by one partition per version
// and checks the broker's Metadata catches up with the new count.
func sweepCreatePartitions(ctx context.Context, e *sweepEnv, v int16) error {
	before, err := partitionCount(ctx, e)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrCreatePartitionsRequest()
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = e.topic, int32(before+1)
	req.Topics = []kmsg.CreatePartitionsRequestTopic{rt}
	req.TimeoutMillis = 10000
	resp, err := request[*kmsg.CreatePartitionsResponse](ctx, e, req, v)
	if err != nil {
		return err
	}
	if len(resp.Topics) != 1 || resp.Topics[0].Topic != e.topic {
		return fmt.Errorf("topics %+v", resp.Topics)
	}
	if code := resp.Topics[0].ErrorCode; code != 0 {
		return kafkaError(code, fmt.Errorf("CreatePartitions"))
	}
	for {
		n, err := partitionCount(ctx, e)
		if err == nil && n == before+1 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("partition count stayed %d (err %v), want %d", n, err, before+1)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func partitionCount(ctx context.Context, e *sweepEnv) (int, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(e.metadataVersion)
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(e.topic)
	req.Topics = []kmsg.MetadataRequestTopic{rt}
	resp, err := e.cl.Request(ctx, e.addr, req)
	if err != nil {
		return 0, err
	}
	mr := resp.(*kmsg.MetadataResponse)
	if len(mr.Topics) != 1 || mr.Topics[0].ErrorCode != 0 {
		return 0, fmt.Errorf("topic %s not answered: %+v", e.topic, mr.Topics)
	}
	return len(mr.Topics[0].Partitions), nil
}

func sweepDescribeConfigs(ctx context.Context, e *sweepEnv, v int16) error {
	req := kmsg.NewPtrDescribeConfigsRequest()
	broker := kmsg.NewDescribeConfigsRequestResource()
	broker.ResourceType, broker.ResourceName = kmsg.ConfigResourceTypeBroker, strconv.Itoa(int(e.brokerID))
	topic := kmsg.NewDescribeConfigsRequestResource()
	topic.ResourceType, topic.ResourceName = kmsg.ConfigResourceTypeTopic, e.topic
	req.Resources = []kmsg.DescribeConfigsRequestResource{broker, topic}
	req.IncludeSynonyms = v >= 1
	req.IncludeDocumentation = v >= 3
	resp, err := request[*kmsg.DescribeConfigsResponse](ctx, e, req, v)
	if err != nil {
		return err
	}
	if len(resp.Resources) != 2 {
		return fmt.Errorf("resources %+v", resp.Resources)
	}
	for _, r := range resp.Resources {
		if r.ErrorCode != 0 {
			return kafkaError(r.ErrorCode, fmt.Errorf("DescribeConfigs %s", r.ResourceName))
		}
		if len(r.Configs) == 0 {
			return fmt.Errorf("no configs for %v %s", r.ResourceType, r.ResourceName)
		}
	}
	return nil
}

func sweepDescribeCluster(ctx context.Context, e *sweepEnv, v int16) error {
	req := kmsg.NewPtrDescribeClusterRequest()
	resp, err := request[*kmsg.DescribeClusterResponse](ctx, e, req, v)
	if err != nil {
		return err
	}
	if resp.ErrorCode != 0 {
		return kafkaError(resp.ErrorCode, fmt.Errorf("DescribeCluster"))
	}
	if resp.ClusterID != e.c.clusterID || resp.ControllerID != e.brokerID {
		return fmt.Errorf("cluster %q controller %d", resp.ClusterID, resp.ControllerID)
	}
	if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != e.brokerID {
		return fmt.Errorf("brokers %+v", resp.Brokers)
	}
	if v >= 1 && resp.EndpointType != 1 {
		return fmt.Errorf("endpoint type %d, want 1 (brokers)", resp.EndpointType)
	}
	return nil
}

// sweepElectLeaders asks a preferred election for partition 0 of the sweep
// topic (its only replica leads: ELECTION_NOT_NEEDED) and for a partition
// that does not exist (UNKNOWN_TOPIC_OR_PARTITION).
func sweepElectLeaders(ctx context.Context, e *sweepEnv, v int16) error {
	req := kmsg.NewPtrElectLeadersRequest()
	req.TimeoutMillis = 10000
	req.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: e.topic, Partitions: []int32{0, 999}}}
	resp, err := request[*kmsg.ElectLeadersResponse](ctx, e, req, v)
	if err != nil {
		return err
	}
	if resp.ErrorCode != 0 {
		return kafkaError(resp.ErrorCode, fmt.Errorf("ElectLeaders"))
	}
	if len(resp.Topics) != 1 || resp.Topics[0].Topic != e.topic || len(resp.Topics[0].Partitions) != 2 {
		return fmt.Errorf("topics %+v", resp.Topics)
	}
	for _, p := range resp.Topics[0].Partitions {
		want := kerr.ElectionNotNeeded.Code
		if p.Partition == 999 {
			want = kerr.UnknownTopicOrPartition.Code
		}
		if p.ErrorCode != want {
			return fmt.Errorf("partition %d: error %d, want %d", p.Partition, p.ErrorCode, want)
		}
	}
	return nil
}

func sweepDescribeQuorum(ctx context.Context, e *sweepEnv, v int16) error {
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
	req.Topics = []kmsg.DescribeQuorumRequestTopic{rt}
	resp, err := request[*kmsg.DescribeQuorumResponse](ctx, e, req, v)
	if err != nil {
		return err
	}
	if resp.ErrorCode != 0 {
		return kafkaError(resp.ErrorCode, fmt.Errorf("DescribeQuorum"))
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return fmt.Errorf("topics %+v", resp.Topics)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.LeaderID != 1 || p.LeaderEpoch < 1 {
		return fmt.Errorf("partition %+v, want leader 1", p)
	}
	var voters []int32
	for _, r := range p.CurrentVoters {
		voters = append(voters, r.ReplicaID)
	}
	if !slices.Equal(voters, []int32{1}) {
		return fmt.Errorf("voters %v, want [1]", voters)
	}
	if v >= 2 && len(resp.Nodes) == 0 {
		return fmt.Errorf("v2 without Nodes")
	}
	return nil
}

func sweepDeleteTopics(ctx context.Context, e *sweepEnv, v int16) error {
	name := sweptTopic(v)
	req := kmsg.NewPtrDeleteTopicsRequest()
	if v >= 6 {
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = []kmsg.DeleteTopicsRequestTopic{rt}
	} else {
		req.TopicNames = []string{name}
	}
	req.TimeoutMillis = 10000
	resp, err := request[*kmsg.DeleteTopicsResponse](ctx, e, req, v)
	if err != nil {
		return err
	}
	if len(resp.Topics) != 1 {
		return fmt.Errorf("topics %+v", resp.Topics)
	}
	got := resp.Topics[0]
	if got.ErrorCode != 0 {
		return kafkaError(got.ErrorCode, fmt.Errorf("DeleteTopics %s", name))
	}
	if got.Topic == nil || *got.Topic != name {
		return fmt.Errorf("answered for topic %v, want %s", got.Topic, name)
	}
	return nil
}
