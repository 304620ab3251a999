package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/coordinator/group"
	"github.com/kraftd/kraftd/protocol"
)

// OffsetFetch: v0-v7 for one group, v8 for several (KIP-709). Topics null
// (v2+) asks for every committed offset of the group; a partition without
// one answers offset -1. A group's coordinator error is the top-level error
// (v2-v7), each partition's (v0-v1), or the group's (v8). RequireStable
// (v7+) answers UNSTABLE_OFFSET_COMMIT for a partition whose
// TxnOffsetCommit offset awaits its transaction's marker.
func (c *ClientAPI) handleOffsetFetch(_ context.Context, req *protocol.Request) (kmsg.Response, error) {
	body := req.Body.(*kmsg.OffsetFetchRequest)
	resp := body.ResponseKind().(*kmsg.OffsetFetchResponse)
	if body.Version >= 8 {
		for _, rg := range body.Groups {
			q := group.OffsetFetchGroup{Group: rg.Group, RequireStable: body.RequireStable}
			if rg.Topics != nil {
				q.Topics = map[string][]int32{}
				for _, t := range rg.Topics {
					q.Topics[t.Topic] = append(q.Topics[t.Topic], t.Partitions...)
				}
			}
			res := c.groups.FetchOffsets(q)
			g := kmsg.NewOffsetFetchResponseGroup()
			g.Group, g.ErrorCode = rg.Group, res.ErrorCode
			for _, t := range fetchedTopics(q, res) {
				gt := kmsg.NewOffsetFetchResponseGroupTopic()
				gt.Topic = t.Topic
				for _, p := range t.Partitions {
					gp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					gp.Partition, gp.Offset, gp.LeaderEpoch, gp.Metadata, gp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
					gt.Partitions = append(gt.Partitions, gp)
				}
				g.Topics = append(g.Topics, gt)
			}
			resp.Groups = append(resp.Groups, g)
		}
		return resp, nil
	}
	q := group.OffsetFetchGroup{Group: body.Group, RequireStable: body.Version >= 7 && body.RequireStable}
	if body.Topics != nil || body.Version < 2 {
		q.Topics = map[string][]int32{}
		for _, t := range body.Topics {
			q.Topics[t.Topic] = append(q.Topics[t.Topic], t.Partitions...)
		}
	}
	res := c.groups.FetchOffsets(q)
	resp.ErrorCode = res.ErrorCode
	resp.Topics = fetchedTopics(q, res)
	return resp, nil
}

// fetchedTopics lays out one group's answer, grouped by topic (clients match
// topics and partitions by name, not position): the partitions asked for,
// or every committed one; with a group error, each partition asked for
// carries it too (v0-v1 have no other place for it).
func fetchedTopics(q group.OffsetFetchGroup, res group.OffsetFetchResult) []kmsg.OffsetFetchResponseTopic {
	var out []kmsg.OffsetFetchResponseTopic
	byTopic := map[string]int{}
	add := func(tp group.TopicPartition, o group.FetchedOffset, code int16) {
		i, ok := byTopic[tp.Topic]
		if !ok {
			t := kmsg.NewOffsetFetchResponseTopic()
			t.Topic = tp.Topic
			out = append(out, t)
			i = len(out) - 1
			byTopic[tp.Topic] = i
		}
		p := kmsg.NewOffsetFetchResponseTopicPartition()
		if code == 0 {
			code = o.ErrorCode
		}
		md := o.Metadata
		p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode = tp.Partition, o.Offset, o.LeaderEpoch, &md, code
		out[i].Partitions = append(out[i].Partitions, p)
	}
	if q.Topics == nil {
		for tp, o := range res.Offsets {
			add(tp, o, 0)
		}
		return out
	}
	for t, ps := range q.Topics {
		for _, p := range ps {
			tp := group.TopicPartition{Topic: t, Partition: p}
			o, ok := res.Offsets[tp]
			if !ok {
				o = group.FetchedOffset{Offset: -1, LeaderEpoch: -1}
			}
			add(tp, o, res.ErrorCode)
		}
	}
	return out
}
