package group

import (
	"context"
	"go.uber.org/zap"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/replica"
	"github.com/kraftd/kraftd/storage"
)

// SyncGroup: v0-v5, Kafka's handleSyncGroup. The leader's assignment is
// written to the group's partition and handed out once the high watermark
// passes it; a follower's sync parks until then. It returns nil when ctx
// ends first.
func (c *Coordinator) SyncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp
	}
	c.mu.Lock()
	wait, code := c.syncLocked(req, resp)
	c.mu.Unlock()
	if wait == nil {
		resp.ErrorCode = code
		return resp
	}
	select {
	case a := <-wait:
		resp.ErrorCode, resp.MemberAssignment = a.code, a.assignment
		if a.code == 0 && req.Version >= 5 {
			c.mu.Lock()
			c.fillSyncProtocol(req.Group, resp)
			c.mu.Unlock()
		}
		return resp
	case <-ctx.Done():
		return nil
	}
}

func (c *Coordinator) fillSyncProtocol(groupID string, resp *kmsg.SyncGroupResponse) {
	sh, _, code := c.resolveLocked(groupID)
	if code != 0 || sh.groups[groupID] == nil {
		return
	}
	g := sh.groups[groupID]
	resp.ProtocolType, resp.Protocol = new(string), new(string)
	*resp.ProtocolType, *resp.Protocol = g.protocolType, g.protocol
}

// syncLocked checks the sync and parks it; the leader's sync also starts
// the write of the assignment (mu is released while it commits). mu held.
func (c *Coordinator) syncLocked(req *kmsg.SyncGroupRequest, resp *kmsg.SyncGroupResponse) (chan syncAnswer, int16) {
	sh, p, code := c.resolveLocked(req.Group)
	if code != 0 {
		return nil, code
	}
	g := sh.groups[req.Group]
	if g == nil {
		return nil, kerr.UnknownMemberID.Code
	}
	m := g.members[req.MemberID]
	switch {
	case g.state == Dead:
		return nil, kerr.CoordinatorNotAvailable.Code
	case m == nil:
		return nil, kerr.UnknownMemberID.Code
	case g.isStaticFenced(req.InstanceID, req.MemberID):
		return nil, kerr.FencedInstanceID.Code
	case req.Generation != g.generation:
		return nil, kerr.IllegalGeneration.Code
	case req.ProtocolType != nil && *req.ProtocolType != g.protocolType,
		req.Protocol != nil && *req.Protocol != g.protocol:
		return nil, kerr.InconsistentGroupProtocol.Code
	}
	switch g.state {
	case Empty:
		return nil, kerr.UnknownMemberID.Code
	case PreparingRebalance:
		return nil, kerr.RebalanceInProgress.Code
	case Stable:
		delete(g.pendingSync, m.id)
		resp.MemberAssignment = m.assignment
		if req.Version >= 5 {
			resp.ProtocolType, resp.Protocol = new(string), new(string)
			*resp.ProtocolType, *resp.Protocol = g.protocolType, g.protocol
		}
		return nil, 0
	}
	// CompletingRebalance.
	ch := make(chan syncAnswer, 1)
	c.answerSync(m, kerr.RebalanceInProgress.Code, nil) // a retried sync supersedes the parked one
	m.syncWait = ch
	delete(g.pendingSync, m.id)
	if m.id == g.leader {
		c.storeAssignmentLocked(sh, p, g, req.GroupAssignment)
	}
	return ch, 0
}

// storeAssignmentLocked writes the leader's assignment; once committed the
// group is Stable and every parked sync gets its part. mu held, released
// while waiting for the high watermark.
func (c *Coordinator) storeAssignmentLocked(sh *shard, p *replica.Partition, g *group, assignments []kmsg.SyncGroupRequestGroupAssignment) {
	byMember := map[string][]byte{}
	for _, a := range assignments {
		byMember[a.MemberID] = a.MemberAssignment
	}
	for id, m := range g.members {
		m.assignment = byMember[id]
		if m.assignment == nil {
			m.assignment = []byte{}
		}
	}
	generation := g.generation
	last, err := c.writeLocked(sh, p, []storage.Record{groupMetadataRecord(g)})
	if err == nil {
		c.mu.Unlock()
		err = c.waitWritten(p, last) // not the leader's ctx: the other members wait on this write too
		c.mu.Lock()
	}
	if c.shardOf(g) == nil || g.state != CompletingRebalance || g.generation != generation {
		return // the group moved on meanwhile; its syncs were answered then
	}
	if err != nil {
		code := writeErrorCode(err)
		for _, m := range g.members {
			m.assignment = nil
			c.answerSync(m, code, nil)
		}
		c.prepareRebalanceLocked(g, c.cfg.NowMs(), "writing the assignment failed: "+err.Error())
		return
	}
	g.transition(Stable, c.cfg.NowMs())
	c.log.Info("stabilized group", zap.String("group", g.id), zap.Int32("generation", g.generation), zap.Int("members", len(g.members)))
	for _, m := range g.members {
		c.answerSync(m, 0, m.assignment)
	}
}

// Heartbeat: v0-v4, Kafka's handleHeartbeat: it extends the member's
// session and tells it whether a rebalance is on.
func (c *Coordinator) Heartbeat(req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	resp.ErrorCode = c.heartbeat(req)
	return resp
}

func (c *Coordinator) heartbeat(req *kmsg.HeartbeatRequest) int16 {
	if req.Group == "" {
		return kerr.InvalidGroupID.Code
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	sh, _, code := c.resolveLocked(req.Group)
	if code != 0 {
		return code
	}
	g := sh.groups[req.Group]
	if g == nil {
		return kerr.UnknownMemberID.Code
	}
	m := g.members[req.MemberID]
	switch {
	case g.state == Dead:
		return kerr.CoordinatorNotAvailable.Code
	case g.isStaticFenced(req.InstanceID, req.MemberID):
		return kerr.FencedInstanceID.Code
	case m == nil || g.state == Empty:
		return kerr.UnknownMemberID.Code
	case req.Generation != g.generation:
		return kerr.IllegalGeneration.Code
	}
	m.heartbeatDeadline = c.cfg.NowMs() + int64(m.sessionTimeoutMs)
	if g.state == PreparingRebalance {
		return kerr.RebalanceInProgress.Code
	}
	return 0
}

// LeaveGroup: v0-v5 (v3+ batched, with group.instance.id), Kafka's
// handleLeaveGroup. Before v3 the single member's error is the top-level
// error.
func (c *Coordinator) LeaveGroup(req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	if req.Version < 3 {
		m := kmsg.NewLeaveGroupRequestMember()
		m.MemberID = req.MemberID
		req.Members = []kmsg.LeaveGroupRequestMember{m}
	}
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp
	}
	c.mu.Lock()
	resp.ErrorCode, resp.Members = c.leaveLocked(req)
	c.mu.Unlock()
	if req.Version < 3 {
		if resp.ErrorCode == 0 && len(resp.Members) == 1 {
			resp.ErrorCode = resp.Members[0].ErrorCode
		}
		resp.Members = nil
	}
	return resp
}

func (c *Coordinator) leaveLocked(req *kmsg.LeaveGroupRequest) (int16, []kmsg.LeaveGroupResponseMember) {
	sh, _, code := c.resolveLocked(req.Group)
	if code != 0 {
		return code, nil
	}
	g := sh.groups[req.Group]
	if g != nil && g.state == Dead {
		return kerr.CoordinatorNotAvailable.Code, nil
	}
	nowMs := c.cfg.NowMs()
	var out []kmsg.LeaveGroupResponseMember
	for _, lm := range req.Members {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID = lm.MemberID, lm.InstanceID
		rm.ErrorCode = c.leaveOneLocked(g, lm, nowMs)
		out = append(out, rm)
	}
	return 0, out
}

func (c *Coordinator) leaveOneLocked(g *group, lm kmsg.LeaveGroupRequestMember, nowMs int64) int16 {
	if g == nil {
		return kerr.UnknownMemberID.Code
	}
	id := lm.MemberID
	if lm.InstanceID != nil {
		staticID, ok := g.static[*lm.InstanceID]
		switch {
		case !ok:
			return kerr.UnknownMemberID.Code
		case id != "" && id != staticID:
			return kerr.FencedInstanceID.Code
		}
		id = staticID
	}
	if _, ok := g.pending[id]; ok {
		delete(g.pending, id)
		c.maybeCompleteJoinLocked(g, nowMs)
		return 0
	}
	m := g.members[id]
	if m == nil {
		return kerr.UnknownMemberID.Code
	}
	c.removeMemberLocked(g, m, nowMs)
	return 0
}
