package app

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/kraftd/kraftd/metadata/controller"
	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// quorumRole runs the node's KRaft replica of __cluster_metadata: a voter when node.id
// is in controller.quorum.voters, an observer otherwise (a broker-only node). A combined
// node runs one replica that both roles share.
//
// The Node is created in Start, after App has formatted or verified storage, because
// it needs the cluster id and the metadata log directory.
type quorumRole struct {
	a         *App
	mu        sync.Mutex
	node      *quorum.Node
	listeners []quorum.Listener
	ready     chan struct{} // closed once node is set
	metrics   *quorumMetrics
}

func newQuorumRole(a *App) *quorumRole {
	q := &quorumRole{a: a, ready: make(chan struct{})}
	q.metrics = newQuorumMetrics(q, a.cfg.NodeID)
	return q
}

// addListener attaches a state machine (controller, broker publisher); call before Start.
func (q *quorumRole) addListener(l quorum.Listener) { q.listeners = append(q.listeners, l) }

func (q *quorumRole) raftConfig() quorum.Config {
	c := &q.a.cfg
	voters := make([]int32, 0, len(c.QuorumVoters))
	for _, v := range c.QuorumVoters {
		voters = append(voters, v.ID)
	}
	return quorum.Config{
		NodeID:               c.NodeID,
		ClusterID:            q.a.clusterID,
		Voters:               voters,
		ElectionTimeoutMs:    int64(c.QuorumElectionTimeoutMs),
		FetchTimeoutMs:       int64(c.QuorumFetchTimeoutMs),
		ElectionBackoffMaxMs: smallestIfZero(int64(c.QuorumElectionBackoffMaxMs)),
		AppendLingerMs:       appendLinger(c.QuorumAppendLingerMs),
		RequestTimeoutMs:     int64(c.QuorumRequestTimeoutMs),
		RetryBackoffMs:       smallestIfZero(int64(c.QuorumRetryBackoffMs)),
	}
}

// metadataDirectoryID is the directory.id of the metadata log directory: with the
// node id, the replica key of a dynamic quorum (KIP-853). Storage is formatted by now.
func metadataDirectoryID(c *Config) (UUID, error) {
	m, err := ReadMetaProperties(c.MetadataDir())
	if err != nil || m.DirectoryID == "" {
		return UUID{}, err
	}
	id, err := ParseUUID(m.DirectoryID)
	if err != nil {
		return UUID{}, badValue("directory.id", m.DirectoryID, err.Error())
	}
	return id, nil
}

// appendLinger maps controller.quorum.append.linger.ms to quorum.Config, where
// zero means the default: Kafka's 0 (no lingering) is AppendLingerMsNone.
func appendLinger(ms int32) int64 {
	if ms == 0 {
		return quorum.AppendLingerMsNone
	}
	return int64(ms)
}

// smallestIfZero maps a backoff to quorum.Config, where zero means the
// default: Kafka's 0 (no backoff) becomes 1 ms, the smallest it can say.
func smallestIfZero(ms int64) int64 {
	if ms == 0 {
		return 1
	}
	return ms
}

// Start opens __cluster_metadata-0 and starts the driver. Called by App.Start with the
// App lock held, so it reads App fields directly.
func (q *quorumRole) Start(ctx context.Context) error {
	c := &q.a.cfg
	// A controller without controller.quorum.voters belongs to a dynamic quorum
	// (KIP-853): the voter set is in its log, from the bootstrap snapshot `storage
	// format --standalone` or `--initial-controllers` wrote.
	raftCfg := q.raftConfig()
	dirID, err := metadataDirectoryID(c)
	if err != nil {
		return err
	}
	raftCfg.DirectoryID = dirID
	if c.HasRole(RoleController) {
		// A controller that is not (yet) a voter fsyncs what it fetches: once it is
		// added, the offset it last fetched counts toward the high watermark.
		raftCfg.FollowersAlwaysFlush = true
		// A voter reports its listeners to the leader (UpdateRaftVoter, KIP-853).
		for _, e := range AdvertisedControllerEndpoints(c) {
			raftCfg.Endpoints = append(raftCfg.Endpoints, quorum.Endpoint{Name: e.Name, Host: e.Host, Port: uint16(e.Port)})
		}
	}
	dir := filepath.Join(c.MetadataDir(), "__cluster_metadata-0")
	log := c.Logger.Named("quorum").With(zap.Int32("node", c.NodeID))
	store, err := raftlog.OpenFileStorage(dir, metadataLogOptions(c, log))
	if err != nil {
		return fmt.Errorf("opening the metadata log in %s: %w", dir, err)
	}
	addrs := make(map[int32]string, len(c.QuorumVoters))
	for _, v := range c.QuorumVoters {
		addrs[v.ID] = joinHostPort(v.Host, v.Port)
	}
	listener := ""
	if len(c.ControllerListenerNames) > 0 {
		listener = c.ControllerListenerNames[0]
	}
	node, err := quorum.NewNode(quorum.NodeConfig{
		Raft:           raftCfg,
		Storage:        store,
		VoterAddrs:     addrs,
		BootstrapAddrs: c.QuorumBootstrapServers,
		ListenerName:   listener,
		Logger:         log,
		OnFatal:        q.a.reportFatal,

		OnCommitLatency: q.metrics.observeCommit,
		RetentionBytes:  retentionLimit(c.MetadataMaxRetentionBytes),
		RetentionMs:     retentionLimit(c.MetadataMaxRetentionMs),
	})
	if err != nil {
		store.Close()
		return err
	}
	for _, l := range q.listeners {
		node.Register(l)
	}
	for _, name := range c.ControllerListenerNames {
		if reg := q.a.registries[name]; reg != nil && c.HasRole(RoleController) {
			node.RegisterHandlers(reg)
			reg.SetApiVersionsHook(q.controllerApiVersions(node))
		}
	}
	node.Start()
	q.mu.Lock()
	q.node = node
	q.mu.Unlock()
	close(q.ready)
	return nil
}

// Stop resigns leadership gracefully (EndQuorumEpoch) within ctx and stops the driver.
func (q *quorumRole) Stop(ctx context.Context) error {
	q.mu.Lock()
	node := q.node
	q.mu.Unlock()
	if node == nil {
		return nil
	}
	return node.Close(ctx)
}

// Node is the running quorum node, or nil before Start.
// controllerApiVersions is the ApiVersions hook of the controller listener: the
// controller's features (metadata.version supported and the finalized features of
// its committed image) and the quorum's (kraft.version).
func (q *quorumRole) controllerApiVersions(node *quorum.Node) func(*protocol.Request, *kmsg.ApiVersionsResponse) {
	var ctrl *controller.Controller
	if q.a.controller != nil {
		ctrl = q.a.controller.Controller()
	}
	return func(req *protocol.Request, resp *kmsg.ApiVersionsResponse) {
		if ctrl != nil {
			ctrl.DecorateApiVersions(req, resp)
		}
		node.DecorateApiVersions(req, resp)
	}
}

func (q *quorumRole) Node() *quorum.Node {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.node
}

// metadataLogOptions are the FileStorage settings of __cluster_metadata-0.
func metadataLogOptions(c *Config, log *zap.Logger) raftlog.FileOptions {
	return raftlog.FileOptions{
		SegmentBytes: c.MetadataLogSegmentBytes,
		SegmentMs:    c.MetadataLogSegmentMs,
		Logger:       log,
	}
}

// retentionLimit maps a metadata.max.retention.* value to quorum.NodeConfig's
// convention, where 0 means the default: Kafka's -1 (unlimited) stays negative,
// and 0 (keep nothing beyond the latest snapshot) becomes the smallest bound.
func retentionLimit(v int64) int64 {
	if v == 0 {
		return 1
	}
	return v
}
