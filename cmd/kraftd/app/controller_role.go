package app

import (
	"context"
	"fmt"
	"sync"

	"github.com/kraftd/kraftd/metadata/controller"
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
