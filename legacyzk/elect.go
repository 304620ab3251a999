package legacyzk

import (
	"errors"

	"go.uber.org/zap"
)

// elect is KafkaController.elect: if /controller names someone, remember
// who; otherwise try to win with one Multi {create ephemeral /controller,
// CAS /controller_epoch to epoch+1} (KAFKA-6082). The read of /controller
// arms the watch that makes every broker re-run elect when it goes.
func (c *controller) elect() {
	if data, _, err := c.store.Get(c.ctx, ControllerPath, true); err == nil {
		c.noteController(data)
		return
	} else if !errors.Is(err, ErrNoNode) {
		c.log.Warn("reading /controller failed", zap.Error(err))
		return
	}
	// The failed Get above armed no data watch on a missing znode; an
	// exists watch covers its creation.
	if _, _, err := c.store.Exists(c.ctx, ControllerPath, true); err != nil {
		return
	}
	epoch, version, err := c.readControllerEpoch()
	if err != nil {
		c.log.Warn("reading /controller_epoch failed", zap.Error(err))
		return
	}
	res, err := c.store.Multi(c.ctx,
		CreateOp{Path: ControllerPath, Data: EncodeController(c.id, c.cfg.nowMs()), Mode: Ephemeral},
		SetDataOp{Path: ControllerEpochPath, Data: EncodeControllerEpoch(epoch + 1), Version: version})
	if err != nil {
		c.log.Debug("lost controller election", zap.Error(err))
		c.maybeResign()
		return
	}
	c.epoch, c.epochZkVersion = epoch+1, res[1].Stat.Version
	c.activeID.Store(c.id)
	c.log.Info("became controller", zap.Int32("controllerEpoch", c.epoch))
	c.guard(c.onControllerFailover())
}

// readControllerEpoch returns the current epoch and its znode version,
// creating /controller_epoch with 0 if absent.
func (c *controller) readControllerEpoch() (int32, int32, error) {
	data, st, err := c.store.Get(c.ctx, ControllerEpochPath, false)
	if errors.Is(err, ErrNoNode) {
		_, err = c.store.Create(c.ctx, ControllerEpochPath, EncodeControllerEpoch(0), Persistent)
		if err != nil && !errors.Is(err, ErrNodeExists) {
			return 0, 0, err
		}
		data, st, err = c.store.Get(c.ctx, ControllerEpochPath, false)
	}
	if err != nil {
		return 0, 0, err
	}
	epoch, err := DecodeControllerEpoch(data)
	return epoch, st.Version, err
}

// maybeResign re-reads /controller (re-arming its watch) and resigns if
// it no longer names this broker.
func (c *controller) maybeResign() {
	data, _, err := c.store.Get(c.ctx, ControllerPath, true)
	switch {
	case errors.Is(err, ErrNoNode):
		c.activeID.Store(-1)
		c.resign()
		c.elect()
	case err != nil:
		c.log.Warn("reading /controller failed", zap.Error(err))
	default:
		c.noteController(data)
	}
}

func (c *controller) noteController(data []byte) {
	id, err := DecodeController(data)
	if err != nil {
		c.log.Warn("bad /controller", zap.Error(err))
		return
	}
	c.activeID.Store(id)
	if id != c.id && c.active {
		c.resign()
	}
}

// resign is onControllerResignation: stop every sender (dropping queued
// requests) and forget the in-memory context. Watches stay registered in
// ZooKeeper but are ignored while inactive.
func (c *controller) resign() {
	if !c.active {
		return
	}
	c.log.Info("resigned as controller", zap.Int32("controllerEpoch", c.epoch))
	c.active = false
	c.activeEpoch.Store(0)
	c.chans.shutdown()
	c.chans = nil
	c.view = ClusterView{}
}

// fenced wraps ops in the controller-epoch check (KAFKA-6082).
func (c *controller) fenced(ops ...Op) []Op {
	return append([]Op{CheckOp{Path: ControllerEpochPath, Version: c.epochZkVersion}}, ops...)
}

// fencedErr maps a failed epoch check to ErrControllerMoved.
func fencedErr(err error) error {
	if epochCheckFailed(err) {
		return errors.Join(ErrControllerMoved, err)
	}
	return err
}
