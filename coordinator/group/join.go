package group

import (
	"context"
	"go.uber.org/zap"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/storage"
)

// JoinGroup: v0-v9, Kafka's GroupCoordinator.handleJoinGroup.
//
// A new dynamic member from v4 on first gets MEMBER_ID_REQUIRED with its id
// (KIP-394) and must join again with it; a static member (KIP-345
// group.instance.id) joins directly and, rejoining under a new member id,
// takes over its old id's place (its predecessor is fenced). A join parks
// until the join phase completes: every member has rejoined, or the
// rebalance timeout (the first rebalance of an empty group: the initial
// rebalance delay) has passed. It returns nil when ctx ends first.
func (c *Coordinator) JoinGroup(ctx context.Context, req *kmsg.JoinGroupRequest, clientID, clientHost string) *kmsg.JoinGroupResponse {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.Generation, resp.MemberID = -1, req.MemberID
	if req.Version < 1 {
		req.RebalanceTimeoutMillis = req.SessionTimeoutMillis
	}
	switch {
	case req.Group == "":
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp
	case req.SessionTimeoutMillis < c.cfg.MinSessionTimeoutMs || req.SessionTimeoutMillis > c.cfg.MaxSessionTimeoutMs:
		resp.ErrorCode = kerr.InvalidSessionTimeout.Code
		return resp
	}
	ps := make([]protocol, 0, len(req.Protocols))
	for _, p := range req.Protocols {
		ps = append(ps, protocol{name: p.Name, metadata: p.Metadata})
	}
	c.mu.Lock()
	wait, code := c.joinLocked(req, ps, clientID, clientHost, resp)
	c.mu.Unlock()
	if wait == nil {
		if code != 0 {
			resp.ErrorCode = code
		}
		return resp
	}
	select {
	case r := <-wait:
		return r
	case <-ctx.Done():
		return nil
	}
}

// joinLocked runs a join: it fills resp and returns a zero code for an
// immediate answer, or returns the channel the answer comes on; mu held.
func (c *Coordinator) joinLocked(req *kmsg.JoinGroupRequest, ps []protocol, clientID, clientHost string, resp *kmsg.JoinGroupResponse) (chan *kmsg.JoinGroupResponse, int16) {
	sh, _, code := c.resolveLocked(req.Group)
	if code != 0 {
		return nil, code
	}
	nowMs := c.cfg.NowMs()
	g := sh.groups[req.Group]
	if g == nil {
		if req.MemberID != "" {
			return nil, kerr.UnknownMemberID.Code
		}
		g = newGroup(req.Group, sh.partition, nowMs)
		sh.groups[req.Group] = g
	}
	if g.state == Dead {
		return nil, kerr.CoordinatorNotAvailable.Code
	}
	_, known := g.members[req.MemberID]
	_, pendingKnown := g.pending[req.MemberID]
	staticKnown := req.InstanceID != nil && g.static[*req.InstanceID] != ""
	// KIP-394 member ids handed out count too: each is a member to come,
	// and a client asking for ids in a loop must not grow the group's books
	// past group.max.size.
	if !known && !pendingKnown && !staticKnown && len(g.members)+len(g.pending) >= c.cfg.GroupMaxSize {
		return nil, kerr.GroupMaxSizeReached.Code
	}
	if !g.supportsProtocols(req.ProtocolType, ps) && !(known && len(g.members) == 1) {
		return nil, kerr.InconsistentGroupProtocol.Code
	}
	if req.MemberID == "" {
		return c.joinUnknownLocked(g, req, ps, clientID, clientHost, resp, nowMs)
	}
	return c.joinKnownLocked(g, req, ps, clientID, clientHost, resp, nowMs)
}

func (c *Coordinator) joinUnknownLocked(g *group, req *kmsg.JoinGroupRequest, ps []protocol, clientID, clientHost string,
	resp *kmsg.JoinGroupResponse, nowMs int64) (chan *kmsg.JoinGroupResponse, int16) {
	id := newMemberID(clientID)
	if req.InstanceID != nil {
		if old, ok := g.static[*req.InstanceID]; ok {
			return c.replaceStaticLocked(g, g.members[old], id, req, ps, resp, nowMs)
		}
		return c.addMemberLocked(g, id, req, ps, clientID, clientHost, nowMs), 0
	}
	if req.Version >= 4 {
		// KIP-394: the id is handed out first, so a client that times out
		// and retries does not leave a ghost member behind.
		g.pending[id] = nowMs + int64(req.SessionTimeoutMillis)
		resp.MemberID = id
		return nil, kerr.MemberIDRequired.Code
	}
	return c.addMemberLocked(g, id, req, ps, clientID, clientHost, nowMs), 0
}

func (c *Coordinator) joinKnownLocked(g *group, req *kmsg.JoinGroupRequest, ps []protocol, clientID, clientHost string,
	resp *kmsg.JoinGroupResponse, nowMs int64) (chan *kmsg.JoinGroupResponse, int16) {
	if g.isStaticFenced(req.InstanceID, req.MemberID) {
		return nil, kerr.FencedInstanceID.Code
	}
	if _, ok := g.pending[req.MemberID]; ok {
		delete(g.pending, req.MemberID)
		return c.addMemberLocked(g, req.MemberID, req, ps, clientID, clientHost, nowMs), 0
	}
	m := g.members[req.MemberID]
	if m == nil {
		return nil, kerr.UnknownMemberID.Code
	}
	switch g.state {
	case PreparingRebalance:
		return c.updateMemberLocked(g, m, req, ps, nowMs), 0
	case CompletingRebalance:
		if m.sameProtocols(ps) {
			// A retried join of this generation: the same answer again.
			c.fillJoinResponse(g, m, resp)
			return nil, 0
		}
		return c.updateMemberLocked(g, m, req, ps, nowMs), 0
	case Stable:
		if m.id == g.leader || !m.sameProtocols(ps) {
			return c.updateMemberLocked(g, m, req, ps, nowMs), 0
		}
		c.fillJoinResponse(g, m, resp)
		return nil, 0
	}
	return nil, kerr.UnknownMemberID.Code
}

// replaceStaticLocked gives a rejoining static member its new member id
// (KIP-345): the old id is fenced, its parked requests answered
// FENCED_INSTANCE_ID; a Stable group with unchanged protocols does not
// rebalance, and the member gets its generation and assignment back.
func (c *Coordinator) replaceStaticLocked(g *group, old *member, id string, req *kmsg.JoinGroupRequest, ps []protocol,
	resp *kmsg.JoinGroupResponse, nowMs int64) (chan *kmsg.JoinGroupResponse, int16) {
	c.answerJoinError(old, kerr.FencedInstanceID.Code)
	c.answerSync(old, kerr.FencedInstanceID.Code, nil)
	delete(g.members, old.id)
	if g.pendingSync[old.id] {
		delete(g.pendingSync, old.id)
		g.pendingSync[id] = true
	}
	old.id = id
	g.members[id] = old
	g.static[*req.InstanceID] = id
	if g.leader != "" && g.members[g.leader] == nil {
		g.leader = id
	}
	old.sessionTimeoutMs, old.rebalanceTimeoutMs = req.SessionTimeoutMillis, req.RebalanceTimeoutMillis
	old.heartbeatDeadline = nowMs + int64(req.SessionTimeoutMillis)
	if g.state == Stable && old.sameProtocols(ps) {
		// The new member id must survive a coordinator move: the group is
		// written again (not awaited; a lost write costs the member one
		// more join under its instance id).
		if sh := c.shardOf(g); sh != nil {
			c.writeBackgroundLocked(sh, []storage.Record{groupMetadataRecord(g)})
		}
		c.fillJoinResponse(g, old, resp)
		resp.Members = nil
		if req.Version >= 9 && id == g.leader {
			// KIP-814: the leader keeps the current assignment.
			resp.SkipAssignment = true
			resp.Members = c.joinMembers(g)
		}
		return nil, 0
	}
	return c.updateMemberLocked(g, old, req, ps, nowMs), 0
}

// addMemberLocked adds a member and rebalances; the answer comes when the
// join phase completes; mu held.
func (c *Coordinator) addMemberLocked(g *group, id string, req *kmsg.JoinGroupRequest, ps []protocol, clientID, clientHost string, nowMs int64) chan *kmsg.JoinGroupResponse {
	m := &member{id: id, instanceID: req.InstanceID, clientID: clientID, clientHost: clientHost,
		sessionTimeoutMs: req.SessionTimeoutMillis, rebalanceTimeoutMs: req.RebalanceTimeoutMillis,
		protocolType: req.ProtocolType, protocols: ps}
	if len(g.members) == 0 {
		g.protocolType = req.ProtocolType
	}
	g.members[id] = m
	if m.instanceID != nil {
		g.static[*m.instanceID] = id
	}
	if g.leader == "" {
		g.leader = id
	}
	g.newMemberJoined = true
	return c.parkJoinLocked(g, m, req.Version, nowMs)
}

// updateMemberLocked takes a known member's new protocols and timeouts and
// rebalances; mu held.
func (c *Coordinator) updateMemberLocked(g *group, m *member, req *kmsg.JoinGroupRequest, ps []protocol, nowMs int64) chan *kmsg.JoinGroupResponse {
	m.protocols, m.protocolType = ps, req.ProtocolType
	m.sessionTimeoutMs, m.rebalanceTimeoutMs = req.SessionTimeoutMillis, req.RebalanceTimeoutMillis
	// A join parked before (the client gave up on it) is superseded.
	c.answerJoinError(m, kerr.UnknownMemberID.Code)
	return c.parkJoinLocked(g, m, req.Version, nowMs)
}

func (c *Coordinator) parkJoinLocked(g *group, m *member, version int16, nowMs int64) chan *kmsg.JoinGroupResponse {
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	m.joinWait, m.joinVersion = ch, version
	m.heartbeatDeadline = nowMs + int64(m.sessionTimeoutMs)
	if g.state == PreparingRebalance {
		c.maybeCompleteJoinLocked(g, nowMs)
	} else {
		c.prepareRebalanceLocked(g, nowMs, "member "+m.id+" joined")
	}
	return ch
}

// prepareRebalanceLocked starts a join phase (Kafka's prepareRebalance): a
// CompletingRebalance group's parked syncs are answered
// REBALANCE_IN_PROGRESS; an Empty group waits the initial rebalance delay;
// mu held.
func (c *Coordinator) prepareRebalanceLocked(g *group, nowMs int64, reason string) {
	c.log.Info("preparing to rebalance group", zap.String("group", g.id), zap.Stringer("state", g.state),
		zap.Int32("old_generation", g.generation), zap.String("reason", reason))
	if g.state == CompletingRebalance {
		for _, m := range g.members {
			m.assignment = nil
			c.answerSync(m, kerr.RebalanceInProgress.Code, nil)
		}
	}
	g.pendingSync, g.syncDeadline = map[string]bool{}, 0
	rebalanceMs := g.maxRebalanceTimeoutMs()
	delayMs := int64(c.cfg.InitialRebalanceDelayMs)
	if g.state == Empty && delayMs > 0 {
		g.initialDelay, g.newMemberJoined = true, false
		g.initialRemaining = max(rebalanceMs-delayMs, 0)
		g.joinDeadline = nowMs + min(delayMs, rebalanceMs)
	} else {
		g.initialDelay = false
		g.joinDeadline = nowMs + rebalanceMs
	}
	g.transition(PreparingRebalance, nowMs)
	c.maybeCompleteJoinLocked(g, nowMs)
}

// maybeCompleteJoinLocked completes the join phase once every member has
// rejoined (not during the initial delay, which always runs out); mu held.
func (c *Coordinator) maybeCompleteJoinLocked(g *group, nowMs int64) {
	if g.state == PreparingRebalance && !g.initialDelay && g.allJoined() {
		c.completeJoinLocked(g, nowMs)
	}
}

// completeJoinLocked ends the join phase (Kafka's onCompleteJoin): members
// that did not rejoin are removed, the generation grows, a protocol is
// chosen, and every parked join is answered (the leader with the members'
// metadata); mu held.
func (c *Coordinator) completeJoinLocked(g *group, nowMs int64) {
	for id, m := range g.members {
		if m.joinWait == nil {
			c.forgetMemberLocked(g, m)
			delete(g.pendingSync, id)
		}
	}
	g.joinDeadline, g.initialDelay = 0, false
	g.generation++
	if len(g.members) == 0 {
		g.protocol, g.leader = "", ""
		g.transition(Empty, nowMs)
		if sh := c.shardOf(g); sh != nil {
			c.writeBackgroundLocked(sh, []storage.Record{groupMetadataRecord(g)})
		}
		return
	}
	if g.members[g.leader] == nil {
		g.leader = g.memberIDs()[0]
	}
	g.protocol = g.selectProtocol()
	g.transition(CompletingRebalance, nowMs)
	g.syncDeadline = nowMs + g.maxRebalanceTimeoutMs()
	for id, m := range g.members {
		g.pendingSync[id] = true
		r := kmsg.NewPtrJoinGroupResponse()
		r.Version = m.joinVersion
		c.fillJoinResponse(g, m, r)
		m.joinWait <- r
		m.joinWait = nil
		m.heartbeatDeadline = nowMs + int64(m.sessionTimeoutMs)
	}
}

// fillJoinResponse answers m with the current generation; the leader gets
// every member's metadata for the chosen protocol.
func (c *Coordinator) fillJoinResponse(g *group, m *member, r *kmsg.JoinGroupResponse) {
	r.ErrorCode, r.Generation, r.MemberID, r.LeaderID = 0, g.generation, m.id, g.leader
	r.ProtocolType = new(string)
	*r.ProtocolType = g.protocolType
	r.Protocol = new(string)
	*r.Protocol = g.protocol
	if r.Version < 7 && g.protocol == "" {
		r.Protocol = nil
	}
	r.Members = nil
	if m.id == g.leader {
		r.Members = c.joinMembers(g)
	}
}

func (c *Coordinator) joinMembers(g *group) []kmsg.JoinGroupResponseMember {
	var out []kmsg.JoinGroupResponseMember
	for _, id := range g.memberIDs() {
		m := g.members[id]
		jm := kmsg.NewJoinGroupResponseMember()
		jm.MemberID, jm.InstanceID, jm.ProtocolMetadata = m.id, m.instanceID, m.metadataFor(g.protocol)
		out = append(out, jm)
	}
	return out
}

// forgetMemberLocked removes m from g's books (not from pendingSync) and
// answers its parked requests UNKNOWN_MEMBER_ID; mu held.
func (c *Coordinator) forgetMemberLocked(g *group, m *member) {
	c.answerJoinError(m, kerr.UnknownMemberID.Code)
	c.answerSync(m, kerr.UnknownMemberID.Code, nil)
	delete(g.members, m.id)
	if m.instanceID != nil && g.static[*m.instanceID] == m.id {
		delete(g.static, *m.instanceID)
	}
	if g.leader == m.id {
		g.leader = ""
		for id, o := range g.members {
			if o.joinWait != nil || g.leader == "" {
				g.leader = id
			}
		}
	}
}

// removeMemberLocked is a member leaving (LeaveGroup or session expiry):
// Kafka's removeMemberAndUpdateGroup; mu held.
func (c *Coordinator) removeMemberLocked(g *group, m *member, nowMs int64) {
	c.forgetMemberLocked(g, m)
	delete(g.pendingSync, m.id)
	switch g.state {
	case PreparingRebalance:
		c.maybeCompleteJoinLocked(g, nowMs)
	case CompletingRebalance, Stable:
		c.prepareRebalanceLocked(g, nowMs, "member "+m.id+" left or its session expired")
	}
}

func (c *Coordinator) shardOf(g *group) *shard {
	sh := c.shards[g.partition]
	if sh == nil || sh.groups[g.id] != g {
		return nil
	}
	return sh
}
