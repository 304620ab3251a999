package app

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/metadata/controller"
	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// controllerRole runs the quorum controller on a node with the controller role. It is
// built in Prepare (the cluster id is known only after storage was prepared), which
// registers it as a quorum listener and serves its handlers before anything starts.
type controllerRole struct {
	a       *App
	metrics *controllerMetrics
	mu      sync.Mutex
	c       *controller.Controller
}

// quorumProposer forwards Propose to the quorum node once it runs.
type quorumProposer struct{ q *quorumRole }

func (p quorumProposer) Propose(ctx context.Context, epoch int32, recs []raftlog.Record) (int64, error) {
	select {
	case <-p.q.ready:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return p.q.Node().Propose(ctx, epoch, recs)
}

// UpgradeKRaftVersion forwards kraft.version upgrades (UpdateFeatures) to the
// quorum node; before it runs this node leads nothing.
func (p quorumProposer) UpgradeKRaftVersion(ctx context.Context, level int16, validateOnly bool) error {
	select {
	case <-p.q.ready:
	default:
		return quorum.ErrNotLeader
	}
	return p.q.Node().UpgradeKRaftVersion(ctx, level, validateOnly)
}

// Resign forwards to the quorum node; before it runs there is nothing to resign.
func (p quorumProposer) Resign(ctx context.Context) error {
	select {
	case <-p.q.ready:
	default:
		return quorum.ErrNotLeader
	}
	return p.q.Node().Resign(ctx)
}

// Prepare is called by App.Start with the App lock held; it reads App fields directly.
func (r *controllerRole) Prepare(ctx context.Context) error {
	cfg := &r.a.cfg
	c, err := controller.New(r.controllerConfig())
	if err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	for _, name := range cfg.ControllerListenerNames {
		if reg := r.a.registries[name]; reg != nil {
			c.RegisterHandlers(reg)
			r.metrics.wrapHeartbeats(reg)
		}
	}
	r.a.quorum.addListener(c)
	r.mu.Lock()
	r.c = c
	r.mu.Unlock()
	return nil
}

// controllerConfig maps the node's settings to controller.Config.
func (r *controllerRole) controllerConfig() controller.Config {
	cfg := &r.a.cfg
	voters := make([]controller.Voter, 0, len(cfg.QuorumVoters))
	for _, v := range cfg.QuorumVoters {
		voters = append(voters, controller.Voter{ID: v.ID, Host: v.Host, Port: int32(v.Port)})
	}
	return controller.Config{
		NodeID:                      cfg.NodeID,
		ClusterID:                   r.a.clusterID,
		Quorum:                      quorumProposer{q: r.a.quorum},
		Logger:                      cfg.Logger,
		SessionTimeoutMs:            int64(cfg.BrokerSessionTimeoutMs),
		HeartbeatIntervalMs:         int64(cfg.BrokerHeartbeatIntervalMs),
		MaxIdleIntervalMs:           maxIdleInterval(cfg.MetadataMaxIdleIntervalMs),
		DefaultNumPartitions:        cfg.NumPartitions,
		DefaultReplicationFactor:    cfg.DefaultReplicationFactor,
		MaxRecordsPerUserOp:         int(cfg.ControllerMaxRecordsPerUserOp),
		UncleanLeaderElectionEnable: cfg.UncleanLeaderElectionEnable,
		Voters:                      voters,
		OtherControllers:            r.otherControllers,
		OnFatal:                     func(err error) { r.a.reportFatal(fmt.Errorf("controller: %w", err)) },
		ReplayFault:                 cfg.controllerReplayFault,
	}
}

// Start runs the controller's event loop.
func (r *controllerRole) Start(context.Context) error { return r.Controller().Start() }

func (r *controllerRole) Stop(context.Context) error {
	r.mu.Lock()
	c := r.c
	r.mu.Unlock()
	if c == nil {
		return nil
	}
	return c.Close()
}

// Controller is the running controller or nil.
func (r *controllerRole) Controller() *controller.Controller {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.c
}

var _ quorum.Listener = (*controller.Controller)(nil)

// maxIdleInterval maps metadata.max.idle.interval.ms to controller.Config,
// where zero means the default: Kafka's 0 (no NoOpRecords) is negative there.
func maxIdleInterval(ms int32) int64 {
	if ms == 0 {
		return -1
	}
	return int64(ms)
}

// featureProbeTimeout bounds the ApiVersions one other controller has to answer
// when UpdateFeatures asks what it supports.
const featureProbeTimeout = 5 * time.Second

// otherControllers asks every other voter of the quorum, on its controller
// listener, which features it supports (ApiVersions SupportedFeatures), for
// UpdateFeatures: Kafka's controllers learned this the same way before they
// registered themselves (KIP-919), which kraftd's do not.
func (r *controllerRole) otherControllers(ctx context.Context) []controller.ControllerSupport {
	node := r.a.quorum.Node()
	if node == nil {
		return nil
	}
	st, err := node.Status(ctx)
	if err != nil {
		return []controller.ControllerSupport{{ID: -1, Err: err}}
	}
	cl := protocol.NewClient(protocol.ClientConfig{ClientID: fmt.Sprintf("kraftd-controller-%d-features", r.a.cfg.NodeID)})
	defer cl.Close()
	var out []controller.ControllerSupport
	for _, id := range st.VoterIDs {
		if id == r.a.cfg.NodeID {
			continue
		}
		out = append(out, askFeatures(ctx, cl, node, id))
	}
	return out
}

// askFeatures asks voter id which features it supports.
func askFeatures(ctx context.Context, cl *protocol.Client, node *quorum.Node, id int32) controller.ControllerSupport {
	s := controller.ControllerSupport{ID: id}
	addr, ok := node.VoterAddr(id)
	if !ok {
		s.Err = fmt.Errorf("no address known for controller %d", id)
		return s
	}
	ctx, cancel := context.WithTimeout(ctx, featureProbeTimeout)
	defer cancel()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3 // SupportedFeatures; metadata.version's minimum is above 0
	req.ClientSoftwareName, req.ClientSoftwareVersion = "kraftd-controller", "1"
	raw, err := cl.Request(ctx, addr, req)
	if err != nil {
		s.Err = err
		return s
	}
	resp := raw.(*kmsg.ApiVersionsResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		s.Err = err
		return s
	}
	s.Features = map[string]controller.FeatureRange{}
	for _, f := range resp.SupportedFeatures {
		s.Features[f.Name] = controller.FeatureRange{Min: f.MinVersion, Max: f.MaxVersion}
	}
	return s
}
