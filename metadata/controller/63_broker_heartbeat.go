package controller

// BrokerHeartbeat, API key 63, versions 0-1 (KIP-631; v1 adds the tagged
// OfflineLogDirs, which only matter with directory assignment, KIP-858).
//
// Every heartbeat refreshes the broker's session and reports its applied
// metadata offset. The broker's state moves as Kafka's
// BrokerHeartbeatManager.calculateNextBrokerState decides:
//
//	FENCED    + WantShutdown                       -> SHUTDOWN_NOW
//	FENCED    + !WantFence, caught up (offset >= its RegisterBrokerRecord)
//	                                               -> UNFENCED: change record Fenced=-1,
//	                                                  then leaders for leaderless partitions
//	UNFENCED  + WantFence (+WantShutdown)          -> FENCED (SHUTDOWN_NOW)
//	UNFENCED  + WantShutdown, leads partitions     -> CONTROLLED_SHUTDOWN: InControlledShutdown=1,
//	                                                  leaderships moved, dropped from ISRs
//	UNFENCED  + WantShutdown, leads nothing        -> SHUTDOWN_NOW
//	CONTROLLED_SHUTDOWN, leads nothing and every active broker reached the
//	offset of those moves                          -> SHUTDOWN_NOW
//
// FENCED and SHUTDOWN_NOW write the fencing records (ISR shrink, leader
// moves, Fenced=1). Unknown broker or wrong BrokerEpoch: STALE_BROKER_EPOCH
// (Kafka uses it even before registration). The response is sent once
// everything appended so far is committed: IsCaughtUp, IsFenced,
// ShouldShutdown.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/kraftd/kraftd/metadata/records"
)

func (c *core) brokerHeartbeat(req *kmsg.BrokerHeartbeatRequest, nowMs int64) Result {
	resp := req.ResponseKind().(*kmsg.BrokerHeartbeatResponse)
	resp.SetVersion(req.Version)
	img := c.pending.img
	b, ok := img.Broker(req.BrokerID)
	s, hasSession := c.sessions.byID[req.BrokerID]
	if !ok || b.Epoch != req.BrokerEpoch || !hasSession {
		resp.ErrorCode, resp.IsFenced = kerr.StaleBrokerEpoch.Code, true
		return Result{Response: resp}
	}
	regOffset := c.pending.regOffsets[req.BrokerID]
	cur := currentState(s)
	next := nextState(cur, req, regOffset, s, c.sessions, func() bool { return hasLeaderships(img, req.BrokerID) })
	var recs []records.Record
	mv := c.metadataVersion()
	if next != cur {
		c.log.Info("broker state change", zap.Int32("broker", req.BrokerID),
			zap.Stringer("from", cur), zap.Stringer("to", next))
		switch next {
		case stateFenced, stateShutdownNow:
			recs = fenceBroker(img, req.BrokerID, mv, c.unclean(img))
		case stateUnfenced:
			recs = unfenceBroker(img, req.BrokerID, b.Epoch, mv, c.unclean(img))
		case stateControlledShutdown:
			recs = controlledShutdown(img, req.BrokerID, b.Epoch, mv, c.unclean(img))
		}
	}
	c.sessions.touch(s, next.fenced(), req.CurrentMetadataOffset, nowMs)
	resp.IsCaughtUp = req.CurrentMetadataOffset >= regOffset
	resp.IsFenced = next.fenced()
	resp.ShouldShutdown = next == stateShutdownNow
	// Kafka's processBrokerHeartbeat returns ControllerResult.of: the moves
	// of a controlled shutdown or a fencing commit batch by batch.
	res := Result{Records: recs, Response: resp, nonAtomic: true}
	if next == stateControlledShutdown {
		res.appended = func(waitOffset int64) {
			if s.controlledShutdownOffset < 0 {
				s.controlledShutdownOffset = waitOffset
			}
		}
	}
	return res
}

func currentState(s *session) brokerState {
	switch {
	case s.shuttingDown():
		return stateControlledShutdown
	case s.fenced:
		return stateFenced
	}
	return stateUnfenced
}

// nextState is the heartbeat state machine (see the file comment).
func nextState(cur brokerState, req *kmsg.BrokerHeartbeatRequest, regOffset int64, s *session,
	ss *sessions, leads func() bool) brokerState {
	switch cur {
	case stateFenced:
		switch {
		case req.WantShutdown:
			return stateShutdownNow
		case !req.WantFence && req.CurrentMetadataOffset >= regOffset:
			return stateUnfenced
		}
		return stateFenced
	case stateUnfenced:
		switch {
		case req.WantFence && req.WantShutdown:
			return stateShutdownNow
		case req.WantFence:
			return stateFenced
		case req.WantShutdown && leads():
			return stateControlledShutdown
		case req.WantShutdown:
			return stateShutdownNow
		}
		return stateUnfenced
	case stateControlledShutdown:
		if leads() || s.controlledShutdownOffset > ss.lowestActiveOffset() {
			return stateControlledShutdown
		}
		return stateShutdownNow
	}
	return stateShutdownNow
}
