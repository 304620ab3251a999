package legacyzk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/metadata/records"
	"github.com/kraftd/kraftd/replica"
)

// The broker's data plane in ZooKeeper mode (Kafka 3.3's ReplicaManager
// side): LeaderAndIsr and StopReplica drive the replica manager
// (OpenDataPlane); topic configs come from /config/topics/<topic> when a
// topic's first partition is hosted and again after each change
// notification under /config/changes; producer ids come in blocks claimed
// from /latest_producer_id_block; ISR changes go to the controller as
// AlterPartition (SendAlterPartition); followers find leaders in the
// metadata cache (LeaderAddr) and the leader judges ISR candidates by it
// (ISRBroker).

// OpenDataPlane hands a Config.DataPlane broker its replica manager m:
// LeaderAndIsr and StopReplica wait until then (the controller's sender
// waits for their answers), because the app opens the logs only once it
// has checked the log directories against /cluster/id, which NewBroker
// reads, as Kafka's broker checks meta.properties before its log manager
// starts. Only the first call counts.
func (b *Broker) OpenDataPlane(m *replica.Manager) {
	b.dataOnce.Do(func() {
		b.replicaMgr.Store(m)
		close(b.dataReady)
	})
}

// replicaManager is the replica manager, nil before OpenDataPlane or without a
// data plane.
func (b *Broker) replicaManager() *replica.Manager { return b.replicaMgr.Load() }

// waitDataPlane returns once OpenDataPlane was called, at once without a
// data plane; ctx ending (the connection closed) is an error.
func (b *Broker) waitDataPlane(ctx context.Context) error {
	if !b.cfg.DataPlane {
		return nil
	}
	select {
	case <-b.dataReady:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// hostReplicas makes the replica manager host the accepted partitions of
// one LeaderAndIsr as their states say, and returns each one's error code
// (in order); caller holds mu. As Kafka's becomeLeaderOrFollower: each
// new partition reads its topic's configs from ZooKeeper (once per topic
// not loaded yet, and again for every new partition, as Kafka reads them
// each time it creates a log), then the request's partitions change role
// together (makeLeaders, makeFollowers) and the followers go to the
// fetchers at once (one addFetcherForPartitions): one ApplyAll, whose log
// creations run concurrently, as the KRaft broker's metadata publish does.
// Hosting them one at a time instead interrupted the fetch in flight to
// each leader once per partition, and each interrupted fetch was followed
// by one naming every partition followed on that leader. A partition
// whose log cannot be opened is KAFKA_STORAGE_ERROR, as Kafka's
// makeLeaders/makeFollowers answer.
func (b *Broker) hostReplicas(ctx context.Context, accepted []acceptedState) []int16 {
	codes := make([]int16, len(accepted))
	m := b.replicaManager()
	if m == nil || len(accepted) == 0 {
		return codes
	}
	states := make([]replica.PartitionState, len(accepted))
	for i, a := range accepted {
		if !b.topicConfigs[a.tp.Topic] || a.p.IsNew {
			if err := b.loadTopicConfig(ctx, b.ctrl.currentStore(), a.tp.Topic); err != nil {
				// The log opens with the defaults; the next change
				// notification or LeaderAndIsr reads the configs again.
				b.log.Warn("reading a topic's configs failed; using the defaults", zap.String("topic", a.tp.Topic), zap.Error(err))
			}
		}
		states[i] = replica.PartitionState{TopicPartition: replica.TopicPartition{Topic: a.tp.Topic, Partition: a.tp.Partition},
			TopicID: [16]byte(a.id), Leader: a.p.Leader, LeaderEpoch: a.p.LeaderEpoch, PartitionEpoch: a.p.ZKVersion,
			Replicas: slices.Clone(a.p.Replicas), ISR: slices.Clone(a.p.ISR)}
	}
	if err := m.ApplyAll(states); err != nil {
		b.log.Error("hosting partitions failed", zap.Error(err))
	}
	for i, st := range states {
		p, ok := m.Partition(st.TopicPartition)
		if !ok || p.State().TopicID != st.TopicID {
			codes[i] = kerr.KafkaStorageError.Code
		}
	}
	return codes
}

// stopReplica stops hosting tp: with del its log is deleted (topic
// deletion, reassignment) and the topic's configs are read again when it
// is next hosted (a new topic of the same name), otherwise its log is only
// closed and kept on disk (controlled shutdown); caller holds mu.
func (b *Broker) stopReplica(tp TopicPartition, del bool) int16 {
	m := b.replicaManager()
	if m == nil {
		return 0
	}
	if del {
		delete(b.topicConfigs, tp.Topic)
	}
	if err := m.Remove(replica.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}, del); err != nil {
		b.log.Error("stopping a replica failed", zap.String("topic", tp.Topic), zap.Int32("partition", tp.Partition), zap.Bool("delete", del), zap.Error(err))
		return kerr.KafkaStorageError.Code
	}
	return 0
}

// ---- topic configs -------------------------------------------------------

// topicConfigZNode is /config/topics/<topic> (AdminZkClient's entity
// config: version 1 and the overrides).
type topicConfigZNode struct {
	Version int               `json:"version"`
	Config  map[string]string `json:"config"`
}

// loadTopicConfig reads /config/topics/<topic> and makes it the topic's
// configuration in the replica manager (over the manager's static
// defaults, as Kafka's LogConfig layers a topic's overrides over the
// broker's) and in the metadata cache (DescribeConfigs, and the produce
// path's min.insync.replicas and message.timestamp.type); caller holds mu.
// A missing znode means no overrides.
func (b *Broker) loadTopicConfig(ctx context.Context, st Store, topic string) error {
	data, _, err := st.Get(ctx, ConfigTopicsPath+"/"+topic, false)
	overrides := map[string]string{}
	switch {
	case errors.Is(err, ErrNoNode):
	case err != nil:
		return err
	case len(data) > 0:
		var z topicConfigZNode
		if err := json.Unmarshal(data, &z); err != nil {
			return fmt.Errorf("%w: /config/topics/%s: %v", ErrBadZnode, topic, err)
		}
		if z.Config != nil {
			overrides = z.Config
		}
	}
	b.topicConfigs[topic] = true
	if err := b.setCachedTopicConfig(topic, overrides); err != nil {
		return err
	}
	m := b.replicaManager()
	cfg, err := m.DefaultTopicConfig().With(func(topicKey, _ string) (string, bool) {
		v, ok := overrides[topicKey]
		return v, ok
	})
	m.SetTopicConfig(topic, cfg)
	if err != nil {
		return fmt.Errorf("topic %s: configs that do not parse keep their defaults: %w", topic, err)
	}
	return nil
}

// setCachedTopicConfig replaces topic's configs in the metadata cache;
// caller holds mu.
func (b *Broker) setCachedTopicConfig(topic string, overrides map[string]string) error {
	cur := b.cache.Load()
	res := image.ConfigResource{Type: image.ConfigTopic, Name: topic}
	var recs []records.Record
	for _, e := range cur.Configs(res) {
		if _, keep := overrides[e.Name]; !keep {
			recs = append(recs, records.Record{Message: &records.ConfigRecord{ResourceType: image.ConfigTopic, ResourceName: topic, Name: e.Name}})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(overrides)) {
		v := overrides[k]
		if old, ok := cur.ConfigValue(res, k); ok && old == v {
			continue
		}
		val := v
		recs = append(recs, records.Record{Message: &records.ConfigRecord{ResourceType: image.ConfigTopic, ResourceName: topic, Name: k, Value: &val}})
	}
	if len(recs) == 0 {
		return nil
	}
	d := image.NewDelta(cur)
	for _, rec := range recs {
		b.cacheOffset++
		if err := d.Replay(b.cacheOffset, b.controllerEpoch, rec); err != nil {
			return err
		}
	}
	b.cache.Store(d.Apply())
	return nil
}

// configChangeExpirationMs is how old a notification under /config/changes
// gets before the brokers that see it delete it
// (ZkNodeChangeNotificationListener's changeExpirationMs, 15 minutes).
const configChangeExpirationMs = 15 * 60 * 1000

// configChangePrefix names the sequential notifications under
// /config/changes (ConfigEntityChangeNotificationSequenceZNode).
const configChangePrefix = "config_change_"

// configChangeZNode is a notification: version 2 names the entity as
// "topics/<topic>"; version 1 (before 2.0) as type and name.
type configChangeZNode struct {
	Version    int    `json:"version"`
	EntityPath string `json:"entity_path"`
	EntityType string `json:"entity_type"`
	EntityName string `json:"entity_name"`
}

// processConfigChanges is ZkConfigManager's notification listener: it
// re-arms the child watch on /config/changes and, once the data plane is
// open, for every notification
// newer than the last one processed, re-reads the named topic's configs
// if this broker has loaded them (a topic not hosted yet reads its configs
// when its first partition is), then deletes the notifications older than
// 15 minutes, as Kafka's listener purges them. It runs on the controller
// loop, which owns the session's watch events, at every new session and at
// each NodeChildrenChanged.
func (b *Broker) processConfigChanges(ctx context.Context, st Store) {
	if !b.cfg.DataPlane {
		return
	}
	children, err := st.Children(ctx, ConfigChangesPath, true)
	if err != nil {
		b.log.Warn("reading config change notifications failed", zap.Error(err))
		return
	}
	if b.replicaManager() == nil {
		// Nothing hosted yet: each topic's configs are read when its
		// first partition is; notifications are processed from the next
		// change on (the watch is armed).
		return
	}
	type note struct {
		seq  int64
		name string
	}
	var notes []note
	for _, c := range children {
		seq, err := strconv.ParseInt(strings.TrimPrefix(c, configChangePrefix), 10, 64)
		if err != nil || !strings.HasPrefix(c, configChangePrefix) {
			continue
		}
		if seq > b.lastConfigChange.Load() {
			notes = append(notes, note{seq, c})
		}
	}
	slices.SortFunc(notes, func(a, c note) int { return cmpInt64(a.seq, c.seq) })
	for _, n := range notes {
		data, _, err := st.Get(ctx, ConfigChangesPath+"/"+n.name, false)
		if err != nil && !errors.Is(err, ErrNoNode) {
			b.log.Warn("reading a config change notification failed", zap.String("notification", n.name), zap.Error(err))
			return // the next event or session retries from here
		}
		if topic, ok := changedTopic(data); ok {
			b.mu.Lock()
			if b.topicConfigs[topic] {
				if err := b.loadTopicConfig(ctx, st, topic); err != nil {
					b.log.Warn("reloading a topic's configs failed", zap.String("topic", topic), zap.Error(err))
				} else {
					b.log.Info("topic configs changed", zap.String("topic", topic))
				}
			}
			b.mu.Unlock()
		}
		b.lastConfigChange.Store(n.seq)
	}
	b.purgeConfigChanges(ctx, st, children)
}

// purgeConfigChanges deletes the notifications among children created more
// than configChangeExpirationMs ago; other brokers race to do the same, so
// a missing znode is fine.
func (b *Broker) purgeConfigChanges(ctx context.Context, st Store, children []string) {
	nowMs := b.cfg.nowMs()
	for _, c := range children {
		if !strings.HasPrefix(c, configChangePrefix) {
			continue
		}
		p := ConfigChangesPath + "/" + c
		stat, ok, err := st.Exists(ctx, p, false)
		if err != nil || !ok || nowMs-stat.CtimeMs <= configChangeExpirationMs {
			continue
		}
		if err := st.Delete(ctx, p, -1); err != nil && !errors.Is(err, ErrNoNode) {
			b.log.Warn("deleting an old config change notification failed", zap.String("notification", c), zap.Error(err))
		}
	}
}

// changedTopic is the topic a notification names, if it names one.
func changedTopic(data []byte) (string, bool) {
	var z configChangeZNode
	if json.Unmarshal(data, &z) != nil {
		return "", false
	}
	switch {
	case z.Version == 2 && strings.HasPrefix(z.EntityPath, "topics/"):
		t := strings.TrimPrefix(z.EntityPath, "topics/")
		return t, t != "" && !strings.Contains(t, "/")
	case z.Version == 1 && z.EntityType == "topics" && z.EntityName != "":
		return z.EntityName, true
	}
	return "", false
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// ---- producer ids ----------------------------------------------------------

// ProducerIDBlockSize is how many ids one claim of
// /latest_producer_id_block takes (ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE).
const ProducerIDBlockSize = 1000

// maxProducerIDBlockClaims bounds the conditional writes one claim tries
// when other brokers keep winning the race; the client retries later.
const maxProducerIDBlockClaims = 10

// producerIDBlockZNode is /latest_producer_id_block as Kafka 3.3's
// ProducerIdBlockZNode writes it: both ends inclusive, as decimal strings.
type producerIDBlockZNode struct {
	Version    int    `json:"version"`
	Broker     int32  `json:"broker"`
	BlockStart string `json:"block_start"`
	BlockEnd   string `json:"block_end"`
}

// EncodeProducerIDBlock is ProducerIdBlockZNode.generateProducerIdBlockJson
// for the block [start, start+ProducerIDBlockSize).
func EncodeProducerIDBlock(broker int32, start int64) []byte {
	out, _ := json.Marshal(producerIDBlockZNode{Version: 1, Broker: broker,
		BlockStart: strconv.FormatInt(start, 10), BlockEnd: strconv.FormatInt(start+ProducerIDBlockSize-1, 10)})
	return out
}

// DecodeProducerIDBlock returns the last id of the block a znode holds.
func DecodeProducerIDBlock(data []byte) (end int64, err error) {
	var z producerIDBlockZNode
	if err := json.Unmarshal(data, &z); err != nil {
		return 0, fmt.Errorf("%w: %s: %v", ErrBadZnode, ProducerIDBlockPath, err)
	}
	start, err1 := strconv.ParseInt(z.BlockStart, 10, 64)
	end, err2 := strconv.ParseInt(z.BlockEnd, 10, 64)
	if err1 != nil || err2 != nil || start < 0 || end < start {
		return 0, fmt.Errorf("%w: %s holds block [%q, %q]", ErrBadZnode, ProducerIDBlockPath, z.BlockStart, z.BlockEnd)
	}
	return end, nil
}

// NextProducerID hands out producer ids (broker.ProducerIDSource) from
// blocks this broker claims in ZooKeeper, as Kafka 3.3's
// ZkProducerIdManager does: read /latest_producer_id_block with its
// version, write the next block after it conditionally on that version,
// and on a lost race read again.
func (b *Broker) NextProducerID(ctx context.Context) (int64, error) {
	b.pidMu.Lock()
	defer b.pidMu.Unlock()
	if b.pidNext >= b.pidEnd {
		start, err := b.claimProducerIDBlock(ctx)
		if err != nil {
			return -1, err
		}
		b.pidNext, b.pidEnd = start, start+ProducerIDBlockSize
	}
	id := b.pidNext
	b.pidNext++
	return id, nil
}

// ErrProducerIDsExhausted: the last block ends too close to 2^63-1.
var ErrProducerIDsExhausted = errors.New("legacyzk: producer ids exhausted")

// claimProducerIDBlock takes the next block; pidMu held.
func (b *Broker) claimProducerIDBlock(ctx context.Context) (int64, error) {
	st := b.ctrl.currentStore()
	for range maxProducerIDBlockClaims {
		data, stat, err := st.Get(ctx, ProducerIDBlockPath, false)
		created := errors.Is(err, ErrNoNode)
		if err != nil && !created {
			return -1, err
		}
		start := int64(0)
		if len(data) > 0 {
			end, err := DecodeProducerIDBlock(data)
			if err != nil {
				return -1, err
			}
			if end > math.MaxInt64-ProducerIDBlockSize {
				return -1, ErrProducerIDsExhausted
			}
			start = end + 1
		}
		if start < b.pidEnd {
			// A block must lie above every id this broker handed out.
			return -1, fmt.Errorf("%w: %s went back to %d after %d", ErrBadZnode, ProducerIDBlockPath, start, b.pidEnd)
		}
		block := EncodeProducerIDBlock(b.cfg.NodeID, start)
		if created {
			_, err = st.Create(ctx, ProducerIDBlockPath, block, Persistent)
		} else {
			_, err = st.Set(ctx, ProducerIDBlockPath, block, stat.Version)
		}
		switch {
		case err == nil:
			b.log.Info("claimed a producer id block", zap.Int64("start", start), zap.Int64("end", start+ProducerIDBlockSize-1))
			return start, nil
		case errors.Is(err, ErrBadVersion), errors.Is(err, ErrNodeExists):
			continue // another broker took this one
		default:
			return -1, err
		}
	}
	return -1, fmt.Errorf("legacyzk: lost %d races for a producer id block", maxProducerIDBlockClaims)
}

// ---- replication transports -------------------------------------------------

// alterPartitionTimeout bounds one AlterPartition round trip to the
// controller (Kafka's controller.socket.timeout.ms is 30 s; the replica
// manager retries a failed send after a short backoff anyway).
const alterPartitionTimeout = 10 * time.Second

// LeaderAddr is broker id's endpoint on this broker's listener in the
// metadata cache: where its followers fetch from.
func (b *Broker) LeaderAddr(id int32) (string, error) {
	br, ok := b.Image().Broker(id)
	if !ok {
		return "", fmt.Errorf("legacyzk: broker %d is not in the metadata cache", id)
	}
	ep, ok := br.Listener(b.cfg.ListenerName)
	if !ok {
		return "", fmt.Errorf("legacyzk: broker %d has no %s listener", id, b.cfg.ListenerName)
	}
	return net.JoinHostPort(ep.Host, strconv.Itoa(int(ep.Port))), nil
}

// SendAlterPartition sends one ISR change request to the controller the
// last UpdateMetadata named, at its address in the metadata cache, as
// Kafka 3.3's AlterPartitionManager does over its controller channel.
func (b *Broker) SendAlterPartition(ctx context.Context, req *kmsg.AlterPartitionRequest) (*kmsg.AlterPartitionResponse, error) {
	id := b.ControllerID()
	if id < 0 {
		return nil, errors.New("legacyzk: no controller known")
	}
	addr, err := b.LeaderAddr(id)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, alterPartitionTimeout)
	defer cancel()
	resp, err := b.client.Request(ctx, addr, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.AlterPartitionResponse), nil
}

// ISRBroker implements replica.BrokerView from the metadata cache: a
// ZooKeeper-era leader takes a follower into the ISR when the cache lists
// its broker as alive (Kafka 3.3's ZkMetadataCache.hasAliveBroker); the
// cache has no broker epochs (UpdateMetadata carries none), so -1.
func (b *Broker) ISRBroker(id int32) (brokerEpoch int64, eligible, registered bool) {
	_, ok := b.Image().Broker(id)
	return -1, ok, ok
}
