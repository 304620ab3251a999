package group

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/storage"
)

// OffsetCommit: v0-v8, Kafka's handleCommitOffsets. Generation -1 (a
// consumer outside any group, or an admin) commits only to an Empty group
// (created if unknown); otherwise the member and generation must be the
// group's. The offsets are written as one batch and answered, and cached,
// once the high watermark passes it.
func (c *Coordinator) OffsetCommit(req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	codes := map[TopicPartition]int16{}
	fill := func(code int16) {
		for tp := range codes {
			if codes[tp] == 0 {
				codes[tp] = code
			}
		}
	}
	var commits []TopicPartition
	var values []committedOffset
	nowMs := c.cfg.NowMs()
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			tp := TopicPartition{t.Topic, p.Partition}
			switch {
			case c.cfg.PartitionExists != nil && !c.cfg.PartitionExists(t.Topic, p.Partition):
				codes[tp] = kerr.UnknownTopicOrPartition.Code
			case p.Metadata != nil && len(*p.Metadata) > c.cfg.OffsetMetadataMaxBytes:
				codes[tp] = kerr.OffsetMetadataTooLarge.Code
			default:
				codes[tp] = 0
				o := committedOffset{offset: p.Offset, leaderEpoch: p.LeaderEpoch, commitMs: nowMs}
				if req.Version < 6 {
					o.leaderEpoch = -1
				}
				if p.Metadata != nil {
					o.metadata = *p.Metadata
				}
				commits, values = append(commits, tp), append(values, o)
			}
		}
	}
	code := c.commit(req, commits, values)
	fill(code)
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, codes[TopicPartition{t.Topic, p.Partition}]
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// commit validates the committer, writes the offsets and waits for them
// (mu is released while it waits). It returns the code for every offset to
// be committed.
func (c *Coordinator) commit(req *kmsg.OffsetCommitRequest, commits []TopicPartition, values []committedOffset) int16 {
	c.mu.Lock()
	defer c.mu.Unlock()
	sh, p, code := c.resolveLocked(req.Group)
	if code != 0 {
		return code
	}
	g := sh.groups[req.Group]
	if g == nil {
		if req.Generation >= 0 {
			return kerr.IllegalGeneration.Code
		}
		g = newGroup(req.Group, sh.partition, c.cfg.NowMs())
		sh.groups[req.Group] = g
	}
	if code := c.checkCommitterLocked(g, req.Generation, req.MemberID, req.InstanceID); code != 0 {
		return code
	}
	if len(commits) == 0 {
		return 0
	}
	recs := make([]storage.Record, len(commits))
	for i, tp := range commits {
		recs[i] = offsetCommitRecord(g.id, tp, &values[i])
	}
	last, err := c.writeLocked(sh, p, recs)
	if err == nil {
		c.mu.Unlock()
		err = c.waitWritten(p, last)
		c.mu.Lock()
	}
	if err != nil {
		return writeErrorCode(err)
	}
	if c.shardOf(g) == nil {
		// The partition moved on while the write committed; the offsets are
		// in the log, and the next coordinator reads them from there.
		return 0
	}
	for i, tp := range commits {
		g.offsets[tp] = values[i]
	}
	return 0
}

// checkCommitterLocked is Kafka's doCommitOffsets' member check; mu held.
func (c *Coordinator) checkCommitterLocked(g *group, generation int32, memberID string, instanceID *string) int16 {
	switch {
	case g.state == Dead:
		return kerr.CoordinatorNotAvailable.Code
	case g.isStaticFenced(instanceID, memberID):
		return kerr.FencedInstanceID.Code
	case generation < 0 && g.state == Empty:
		return 0
	case g.state == CompletingRebalance:
		return kerr.RebalanceInProgress.Code
	case g.members[memberID] == nil:
		return kerr.UnknownMemberID.Code
	case generation != g.generation:
		return kerr.IllegalGeneration.Code
	}
	m := g.members[memberID]
	m.heartbeatDeadline = c.cfg.NowMs() + int64(m.sessionTimeoutMs)
	return 0
}

// OffsetFetchGroup is one group of an OffsetFetch: the partitions asked for,
// or all the group's offsets when Topics is nil.
type OffsetFetchGroup struct {
	Group  string
	Topics map[string][]int32 // nil: every committed offset
}

// OffsetFetchResult is one group's answer: ErrorCode for the whole group, or
// per partition offsets (-1 where nothing is committed).
type OffsetFetchResult struct {
	ErrorCode int16
	Offsets   map[TopicPartition]FetchedOffset
}

// FetchedOffset is a committed offset as OffsetFetch returns it.
type FetchedOffset struct {
	Offset      int64
	LeaderEpoch int32
	Metadata    string
}

// FetchOffsets answers OffsetFetch for one group (Kafka's
// handleFetchOffsets). No transactional offsets exist yet, so RequireStable
// never sees UNSTABLE_OFFSET_COMMIT.
func (c *Coordinator) FetchOffsets(q OffsetFetchGroup) OffsetFetchResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	sh, _, code := c.resolveLocked(q.Group)
	if code != 0 {
		return OffsetFetchResult{ErrorCode: code}
	}
	out := OffsetFetchResult{Offsets: map[TopicPartition]FetchedOffset{}}
	g := sh.groups[q.Group]
	if q.Topics == nil {
		if g != nil {
			for tp, o := range g.offsets {
				out.Offsets[tp] = FetchedOffset{o.offset, o.leaderEpoch, o.metadata}
			}
		}
		return out
	}
	for t, ps := range q.Topics {
		for _, p := range ps {
			tp := TopicPartition{t, p}
			f := FetchedOffset{Offset: -1, LeaderEpoch: -1}
			if g != nil {
				if o, ok := g.offsets[tp]; ok {
					f = FetchedOffset{o.offset, o.leaderEpoch, o.metadata}
				}
			}
			out.Offsets[tp] = f
		}
	}
	return out
}

// OffsetDelete: v0, Kafka's handleDeleteOffsets (KIP-496): offsets of an
// Empty group, or of topics no member of a consumer group subscribes to
// (GROUP_SUBSCRIBED_TO_TOPIC otherwise).
func (c *Coordinator) OffsetDelete(req *kmsg.OffsetDeleteRequest) *kmsg.OffsetDeleteResponse {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	codes := map[TopicPartition]int16{}
	resp.ErrorCode = c.offsetDelete(req, codes)
	if resp.ErrorCode != 0 {
		return resp
	}
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, codes[TopicPartition{t.Topic, p.Partition}]
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func (c *Coordinator) offsetDelete(req *kmsg.OffsetDeleteRequest, codes map[TopicPartition]int16) int16 {
	c.mu.Lock()
	defer c.mu.Unlock()
	sh, p, code := c.resolveLocked(req.Group)
	if code != 0 {
		return code
	}
	g := sh.groups[req.Group]
	if g == nil || g.state == Dead {
		return kerr.GroupIDNotFound.Code
	}
	var subscribed map[string]bool
	if g.state != Empty {
		var ok bool
		if subscribed, ok = g.subscribedTopics(); !ok {
			return kerr.NonEmptyGroup.Code
		}
	}
	var recs []storage.Record
	var gone []TopicPartition
	for _, t := range req.Topics {
		for _, pt := range t.Partitions {
			tp := TopicPartition{t.Topic, pt.Partition}
			if subscribed[t.Topic] {
				codes[tp] = kerr.GroupSubscribedToTopic.Code
				continue
			}
			if _, ok := g.offsets[tp]; ok {
				recs = append(recs, offsetCommitRecord(g.id, tp, nil))
				gone = append(gone, tp)
			}
		}
	}
	if len(recs) == 0 {
		return 0
	}
	last, err := c.writeLocked(sh, p, recs)
	if err == nil {
		c.mu.Unlock()
		err = c.waitWritten(p, last)
		c.mu.Lock()
	}
	if err != nil {
		return writeErrorCode(err)
	}
	for _, tp := range gone {
		delete(g.offsets, tp)
	}
	return 0
}
