package group

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/replica"
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
			o, code := c.offsetToCommit(t.Topic, p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, req.Version >= 6, nowMs)
			codes[tp] = code
			if code == 0 {
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
		values[i].logOffset = last
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
	// RequireStable (v7+): a partition with a transactional offset
	// awaiting its marker is UNSTABLE_OFFSET_COMMIT.
	RequireStable bool
}

// OffsetFetchResult is one group's answer: ErrorCode for the whole group, or
// per partition offsets (-1 where nothing is committed).
type OffsetFetchResult struct {
	ErrorCode int16
	Offsets   map[TopicPartition]FetchedOffset
}

// FetchedOffset is a committed offset as OffsetFetch returns it.
type FetchedOffset struct {
	ErrorCode   int16 // UNSTABLE_OFFSET_COMMIT (RequireStable), else 0
	Offset      int64
	LeaderEpoch int32
	Metadata    string
}

// FetchOffsets answers OffsetFetch for one group (Kafka's
// handleFetchOffsets). With RequireStable a partition whose
// TxnOffsetCommit offset awaits its marker is UNSTABLE_OFFSET_COMMIT.
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
				out.Offsets[tp] = FetchedOffset{Offset: o.offset, LeaderEpoch: o.leaderEpoch, Metadata: o.metadata}
			}
			if q.RequireStable {
				for _, offs := range g.pendingTxn {
					for tp := range offs {
						out.Offsets[tp] = FetchedOffset{ErrorCode: kerr.UnstableOffsetCommit.Code, Offset: -1, LeaderEpoch: -1}
					}
				}
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
					f = FetchedOffset{Offset: o.offset, LeaderEpoch: o.leaderEpoch, Metadata: o.metadata}
				}
				if q.RequireStable && g.hasPending(tp) {
					f = FetchedOffset{ErrorCode: kerr.UnstableOffsetCommit.Code, Offset: -1, LeaderEpoch: -1}
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

// offsetToCommit checks one partition of an OffsetCommit or TxnOffsetCommit (the
// partition exists, its metadata fits offset.metadata.max.bytes) and returns what
// to write, or the partition's error. withEpoch: the request version carries
// the committed leader epoch.
func (c *Coordinator) offsetToCommit(topic string, partition int32, offset int64, leaderEpoch int32, metadata *string, withEpoch bool, nowMs int64) (committedOffset, int16) {
	switch {
	case c.cfg.PartitionExists != nil && !c.cfg.PartitionExists(topic, partition):
		return committedOffset{}, kerr.UnknownTopicOrPartition.Code
	case metadata != nil && len(*metadata) > c.cfg.OffsetMetadataMaxBytes:
		return committedOffset{}, kerr.OffsetMetadataTooLarge.Code
	}
	o := committedOffset{offset: offset, leaderEpoch: leaderEpoch, commitMs: nowMs}
	if !withEpoch {
		o.leaderEpoch = -1
	}
	if metadata != nil {
		o.metadata = *metadata
	}
	return o, 0
}

// TxnOffsetCommit: v0-v3 (transaction.version 1), Kafka's
// handleTxnOffsetCommit. verify is the transaction coordinator's word that
// the group's __consumer_offsets partition is in producer (id, epoch)'s
// ongoing transaction (AddOffsetsToTxn added it); it is asked before the
// coordinator's lock is taken and may return a *kerr.Error (answered as
// it is) or an error wrapping replica.ErrNotEnoughReplicas (the
// coordinator could not answer yet: COORDINATOR_NOT_AVAILABLE, retriable).
// v3+ checks the member and generation when a generation is given. The
// offsets are written as a transactional batch of the producer (sequence
// -1) and stay pending until its marker: CompleteTxn.
func (c *Coordinator) TxnOffsetCommit(req *kmsg.TxnOffsetCommitRequest, verify func(producerID int64, producerEpoch int16) error) *kmsg.TxnOffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	codes := map[TopicPartition]int16{}
	var commits []TopicPartition
	var values []committedOffset
	nowMs := c.cfg.NowMs()
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			tp := TopicPartition{t.Topic, p.Partition}
			o, code := c.offsetToCommit(t.Topic, p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, req.Version >= 2, nowMs)
			codes[tp] = code
			if code == 0 {
				commits, values = append(commits, tp), append(values, o)
			}
		}
	}
	code := int16(0)
	switch {
	case req.ProducerID < 0 || req.ProducerEpoch < 0:
		code = kerr.InvalidProducerIDMapping.Code
	case len(commits) > 0:
		code = verifyCode(verify(req.ProducerID, req.ProducerEpoch))
	}
	if code == 0 {
		code = c.txnCommit(req, commits, values)
	}
	for tp := range codes {
		if codes[tp] == 0 {
			codes[tp] = code
		}
	}
	for _, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, codes[TopicPartition{t.Topic, p.Partition}]
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// verifyCode is TxnOffsetCommit's answer for a failed verification.
func verifyCode(err error) int16 {
	var ke *kerr.Error
	switch {
	case err == nil:
		return 0
	case errors.Is(err, replica.ErrNotEnoughReplicas):
		return kerr.CoordinatorNotAvailable.Code
	case errors.As(err, &ke):
		return ke.Code
	}
	return kerr.InvalidTxnState.Code
}

// txnCommit checks the committer (Kafka's doTxnCommitOffsets), writes the
// offsets in the producer's transaction and records them pending.
func (c *Coordinator) txnCommit(req *kmsg.TxnOffsetCommitRequest, commits []TopicPartition, values []committedOffset) int16 {
	c.mu.Lock()
	defer c.mu.Unlock()
	sh, p, code := c.resolveLocked(req.Group)
	if code != 0 {
		return code
	}
	g := sh.groups[req.Group]
	if g == nil {
		// Kafka creates the group (a producer outside any group, v0-v2).
		g = newGroup(req.Group, sh.partition, c.cfg.NowMs())
		sh.groups[req.Group] = g
	}
	switch {
	case g.state == Dead:
		return kerr.CoordinatorNotAvailable.Code
	case g.isStaticFenced(req.InstanceID, req.MemberID):
		return kerr.FencedInstanceID.Code
	case req.MemberID != "" && g.members[req.MemberID] == nil:
		return kerr.UnknownMemberID.Code
	case req.Generation >= 0 && req.Generation != g.generation:
		return kerr.IllegalGeneration.Code
	}
	if len(commits) == 0 {
		return 0
	}
	recs := make([]storage.Record, len(commits))
	for i, tp := range commits {
		recs[i] = offsetCommitRecord(g.id, tp, &values[i])
	}
	last, err := c.writeTxnLocked(sh, p, recs, req.ProducerID, req.ProducerEpoch)
	if err != nil {
		if errors.Is(err, replica.ErrInvalidProducerEpoch) {
			return kerr.ProducerFenced.Code
		}
		return writeErrorCode(err)
	}
	// Pending from the moment the batch is in the log: its marker may come
	// before the high watermark passes it.
	for i, tp := range commits {
		values[i].logOffset = last
		g.addPending(req.ProducerID, tp, values[i])
	}
	c.mu.Unlock()
	err = c.waitWritten(p, last)
	c.mu.Lock()
	if err != nil {
		return writeErrorCode(err)
	}
	return 0
}

// CompleteTxn applies the transaction marker of producer producerID at
// markerOffset of __consumer_offsets partition partition, once committed
// (WriteTxnMarkers, or the local marker path): the producer's pending
// offsets written before it commit or are dropped. A marker for a
// partition still loading is kept and applied when the load ends.
func (c *Coordinator) CompleteTxn(partition int32, producerID int64, commit bool, markerOffset int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sh := c.shards[partition]
	switch {
	case sh == nil:
		return // not ours: the next leader reads the marker from the log
	case !sh.loaded:
		sh.markers = append(sh.markers, txnMarker{pid: producerID, commit: commit, offset: markerOffset})
		return
	}
	for _, g := range sh.groups {
		g.completeTxn(producerID, commit, markerOffset)
	}
}
