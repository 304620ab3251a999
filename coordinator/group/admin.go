package group

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/storage"
)

// ListGroups: v0-v4, the groups this broker coordinates (v4: those in one
// of StatesFilter's states, compared case-insensitively).
// COORDINATOR_LOAD_IN_PROGRESS while a partition it leads still loads, with
// the groups known so far.
func (c *Coordinator) ListGroups(req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.followLeadershipLocked()
	for _, sh := range c.shards {
		if !sh.loaded {
			resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
			continue
		}
		for _, g := range sh.groups {
			if g.state == Dead {
				continue
			}
			state := g.state.String()
			if len(req.StatesFilter) > 0 && !slices.ContainsFunc(req.StatesFilter, func(s string) bool { return strings.EqualFold(s, state) }) {
				continue
			}
			lg := kmsg.NewListGroupsResponseGroup()
			lg.Group, lg.ProtocolType, lg.GroupState = g.id, g.protocolType, state
			lg.GroupType = "classic"
			resp.Groups = append(resp.Groups, lg)
		}
	}
	slices.SortFunc(resp.Groups, func(a, b kmsg.ListGroupsResponseGroup) int { return strings.Compare(a.Group, b.Group) })
	return resp
}

// DescribeGroup answers one group of DescribeGroups (Kafka's
// GroupMetadata.summary): members' metadata and assignments only while
// Stable; an unknown group is Dead with no error.
func (c *Coordinator) DescribeGroup(groupID string) kmsg.DescribeGroupsResponseGroup {
	out := kmsg.NewDescribeGroupsResponseGroup()
	out.Group = groupID
	c.mu.Lock()
	defer c.mu.Unlock()
	sh, _, code := c.resolveLocked(groupID)
	if code != 0 {
		out.ErrorCode = code
		return out
	}
	g := sh.groups[groupID]
	if g == nil {
		out.State = Dead.String()
		return out
	}
	out.State, out.ProtocolType = g.state.String(), g.protocolType
	if g.state == Stable {
		out.Protocol = g.protocol
	}
	for _, id := range g.memberIDs() {
		m := g.members[id]
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID, dm.InstanceID, dm.ClientID, dm.ClientHost = m.id, m.instanceID, m.clientID, m.clientHost
		if g.state == Stable {
			dm.ProtocolMetadata, dm.MemberAssignment = m.metadataFor(g.protocol), m.assignment
		}
		out.Members = append(out.Members, dm)
	}
	return out
}

// DeleteGroup deletes an Empty group and its offsets (DeleteGroups, Kafka's
// handleDeleteGroups): GROUP_ID_NOT_FOUND for an unknown group,
// NON_EMPTY_GROUP while it has members. Tombstones for the group and every
// offset are written and awaited.
func (c *Coordinator) DeleteGroup(groupID string) int16 {
	c.mu.Lock()
	defer c.mu.Unlock()
	sh, p, code := c.resolveLocked(groupID)
	if code != 0 {
		return code
	}
	g := sh.groups[groupID]
	switch {
	case g == nil || g.state == Dead:
		return kerr.GroupIDNotFound.Code
	case g.state != Empty:
		return kerr.NonEmptyGroup.Code
	}
	recs := []storage.Record{groupTombstone(g.id)}
	for tp := range g.offsets {
		recs = append(recs, offsetCommitRecord(g.id, tp, nil))
	}
	g.transition(Dead, c.cfg.NowMs())
	delete(sh.groups, g.id)
	last, err := c.writeLocked(sh, p, recs)
	if err == nil {
		c.mu.Unlock()
		err = c.waitWritten(p, last)
		c.mu.Lock()
	}
	if err != nil {
		return writeErrorCode(err)
	}
	return 0
}
