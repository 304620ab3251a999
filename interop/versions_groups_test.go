package interop

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The group APIs' sweepers. Each version works on groups of its own, so
// versions do not see each other's members.

// errRetry: the coordinator is not ready yet (its partition is being
// created, elected or loaded); the sweeper tries again.
var errRetry = errors.New("coordinator not ready")

func coordinatorRetriable(code int16) bool {
	return code == kerr.CoordinatorNotAvailable.Code || code == kerr.CoordinatorLoadInProgress.Code || code == kerr.NotCoordinator.Code
}

// untilReady repeats fn while it reports errRetry, for up to 20 s.
func untilReady(ctx context.Context, fn func() error) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		err := fn()
		if !errors.Is(err, errRetry) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", err, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func sweepFindGroupCoordinator(ctx context.Context, e *sweepEnv, v int16) error {
	return untilReady(ctx, func() error {
		req := kmsg.NewPtrFindCoordinatorRequest()
		key := fmt.Sprintf("sweep-find-v%d", v)
		req.CoordinatorKey, req.CoordinatorKeys = key, []string{key}
		resp, err := request[*kmsg.FindCoordinatorResponse](ctx, e, req, v)
		if err != nil {
			return err
		}
		co := kmsg.FindCoordinatorResponseCoordinator{Key: key, NodeID: resp.NodeID, Port: resp.Port, ErrorCode: resp.ErrorCode}
		if v >= 4 {
			if len(resp.Coordinators) != 1 {
				return fmt.Errorf("coordinators %+v", resp.Coordinators)
			}
			co = resp.Coordinators[0]
		}
		switch {
		case coordinatorRetriable(co.ErrorCode):
			return errRetry
		case co.ErrorCode != 0:
			return kafkaError(co.ErrorCode, fmt.Errorf("FindCoordinator"))
		case co.Key != key || co.NodeID != e.brokerID || int(co.Port) != e.c.brokerPorts[e.brokerID]:
			return fmt.Errorf("coordinator %+v, want broker %d", co, e.brokerID)
		}
		return nil
	})
}

// sweepJoin joins group as its only member (KIP-394 round trip from v4)
// at version v and returns the member id and generation.
func sweepJoin(ctx context.Context, e *sweepEnv, group string, v int16) (string, int32, error) {
	member := ""
	var resp *kmsg.JoinGroupResponse
	err := untilReady(ctx, func() error {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group, req.MemberID, req.ProtocolType = group, member, "consumer"
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 60000, 10000
		req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{1, 2}}}
		var err error
		if resp, err = request[*kmsg.JoinGroupResponse](ctx, e, req, v); err != nil {
			return err
		}
		switch {
		case coordinatorRetriable(resp.ErrorCode):
			return errRetry
		case resp.ErrorCode == kerr.MemberIDRequired.Code && v >= 4 && member == "":
			member = resp.MemberID
			return errRetry
		}
		return kafkaError(resp.ErrorCode, fmt.Errorf("JoinGroup"))
	})
	if err != nil {
		return "", 0, err
	}
	if resp.Generation != 1 || resp.LeaderID != resp.MemberID || len(resp.Members) != 1 || resp.Members[0].MemberID != resp.MemberID ||
		string(resp.Members[0].ProtocolMetadata) != "\x01\x02" || resp.Protocol == nil || *resp.Protocol != "range" {
		return "", 0, fmt.Errorf("join answer %+v", resp)
	}
	return resp.MemberID, resp.Generation, nil
}

// sweepStable joins group and syncs it (both at fixed versions): one
// member, Stable.
func sweepStable(ctx context.Context, e *sweepEnv, group string) (string, int32, error) {
	member, gen, err := sweepJoin(ctx, e, group, 5)
	if err != nil {
		return "", 0, err
	}
	_, err = sweepSync(ctx, e, group, member, gen, 3)
	return member, gen, err
}

func sweepSync(ctx context.Context, e *sweepEnv, group, member string, gen int32, v int16) (*kmsg.SyncGroupResponse, error) {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group, req.MemberID, req.Generation = group, member, gen
	if v >= 5 {
		req.ProtocolType, req.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	}
	req.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: member, MemberAssignment: []byte{7, 7}}}
	resp, err := request[*kmsg.SyncGroupResponse](ctx, e, req, v)
	if err != nil {
		return nil, err
	}
	if resp.ErrorCode != 0 {
		return nil, kafkaError(resp.ErrorCode, fmt.Errorf("SyncGroup"))
	}
	if string(resp.MemberAssignment) != "\x07\x07" {
		return nil, fmt.Errorf("assignment %x", resp.MemberAssignment)
	}
	return resp, nil
}

func sweepJoinGroup(ctx context.Context, e *sweepEnv, v int16) error {
	_, _, err := sweepJoin(ctx, e, fmt.Sprintf("sweep-join-v%d", v), v)
	return err
}

func sweepSyncGroup(ctx context.Context, e *sweepEnv, v int16) error {
	group := fmt.Sprintf("sweep-sync-v%d", v)
	member, gen, err := sweepJoin(ctx, e, group, 5)
	if err != nil {
		return err
	}
	resp, err := sweepSync(ctx, e, group, member, gen, v)
	if err == nil && v >= 5 && (resp.Protocol == nil || *resp.Protocol != "range") {
		return fmt.Errorf("protocol %v", resp.Protocol)
	}
	return err
}

func sweepHeartbeat(ctx context.Context, e *sweepEnv, v int16) error {
	group := fmt.Sprintf("sweep-heartbeat-v%d", v)
	member, gen, err := sweepStable(ctx, e, group)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.MemberID, req.Generation = group, member, gen
	resp, err := request[*kmsg.HeartbeatResponse](ctx, e, req, v)
	if err != nil {
		return err
	}
	return kafkaError(resp.ErrorCode, fmt.Errorf("Heartbeat"))
}

func sweepLeaveGroup(ctx context.Context, e *sweepEnv, v int16) error {
	group := fmt.Sprintf("sweep-leave-v%d", v)
	member, _, err := sweepStable(ctx, e, group)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group, req.MemberID = group, member
	req.Members = []kmsg.LeaveGroupRequestMember{{MemberID: member}}
	resp, err := request[*kmsg.LeaveGroupResponse](ctx, e, req, v)
	if err != nil {
		return err
	}
	if resp.ErrorCode != 0 {
		return kafkaError(resp.ErrorCode, fmt.Errorf("LeaveGroup"))
	}
	if v >= 3 && (len(resp.Members) != 1 || resp.Members[0].ErrorCode != 0 || resp.Members[0].MemberID != member) {
		return fmt.Errorf("members %+v", resp.Members)
	}
	return sweepGroupState(ctx, e, group, "Empty")
}

func sweepGroupState(ctx context.Context, e *sweepEnv, group, want string) error {
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{group}
	resp, err := request[*kmsg.DescribeGroupsResponse](ctx, e, req, 0)
	if err != nil {
		return err
	}
	if len(resp.Groups) != 1 || resp.Groups[0].State != want {
		return fmt.Errorf("described %+v, want state %s", resp.Groups, want)
	}
	return nil
}

// sweepCommitGroup is the group OffsetCommit v commits to (generation -1,
// an Empty group); later sweepers read, delete and describe these groups.
func sweepCommitGroup(v int16) string { return fmt.Sprintf("sweep-commit-v%d", v) }

func sweepOffsetCommit(ctx context.Context, e *sweepEnv, v int16) error {
	return untilReady(ctx, func() error {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation = sweepCommitGroup(v), -1
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset, p.Metadata = 0, int64(10+v), kmsg.StringPtr("md")
		req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: e.topic, Partitions: []kmsg.OffsetCommitRequestTopicPartition{p}}}
		resp, err := request[*kmsg.OffsetCommitResponse](ctx, e, req, v)
		if err != nil {
			return err
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return fmt.Errorf("answer %+v", resp.Topics)
		}
		code := resp.Topics[0].Partitions[0].ErrorCode
		if coordinatorRetriable(code) {
			return errRetry
		}
		return kafkaError(code, fmt.Errorf("OffsetCommit"))
	})
}

// fetchCommitted reads partition 0 of the sweep topic for group at v.
func fetchCommitted(ctx context.Context, e *sweepEnv, group string, v int16) (int64, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: e.topic, Partitions: []int32{0}}}
	req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: group, Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: e.topic, Partitions: []int32{0}}}}}
	resp, err := request[*kmsg.OffsetFetchResponse](ctx, e, req, v)
	if err != nil {
		return 0, err
	}
	if v >= 8 {
		if len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 || len(resp.Groups[0].Topics) != 1 || len(resp.Groups[0].Topics[0].Partitions) != 1 {
			return 0, fmt.Errorf("answer %+v", resp.Groups)
		}
		p := resp.Groups[0].Topics[0].Partitions[0]
		return p.Offset, kafkaError(p.ErrorCode, fmt.Errorf("OffsetFetch"))
	}
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, fmt.Errorf("answer error %d topics %+v", resp.ErrorCode, resp.Topics)
	}
	p := resp.Topics[0].Partitions[0]
	return p.Offset, kafkaError(p.ErrorCode, fmt.Errorf("OffsetFetch"))
}

func sweepOffsetFetch(ctx context.Context, e *sweepEnv, v int16) error {
	// Each OffsetFetch version reads what the OffsetCommit of the same
	// version number committed (OffsetCommit v0-v8 ran before).
	off, err := fetchCommitted(ctx, e, sweepCommitGroup(v), v)
	if err == nil && off != int64(10+v) {
		err = fmt.Errorf("offset %d, want %d", off, 10+v)
	}
	return err
}

func sweepDescribeGroups(ctx context.Context, e *sweepEnv, v int16) error {
	group := fmt.Sprintf("sweep-describe-v%d", v)
	member, _, err := sweepStable(ctx, e, group)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{group, "sweep-nobody"}
	resp, err := request[*kmsg.DescribeGroupsResponse](ctx, e, req, v)
	if err != nil {
		return err
	}
	if len(resp.Groups) != 2 {
		return fmt.Errorf("groups %+v", resp.Groups)
	}
	g, none := resp.Groups[0], resp.Groups[1]
	if g.ErrorCode != 0 || g.State != "Stable" || g.ProtocolType != "consumer" || g.Protocol != "range" || len(g.Members) != 1 ||
		g.Members[0].MemberID != member || string(g.Members[0].MemberAssignment) != "\x07\x07" {
		return fmt.Errorf("described %+v", g)
	}
	if none.ErrorCode != 0 || none.State != "Dead" {
		return fmt.Errorf("unknown group described %+v", none)
	}
	return nil
}

func sweepListGroups(ctx context.Context, e *sweepEnv, v int16) error {
	req := kmsg.NewPtrListGroupsRequest()
	if v >= 4 {
		req.StatesFilter = []string{"empty"}
	}
	resp, err := request[*kmsg.ListGroupsResponse](ctx, e, req, v)
	if err != nil {
		return err
	}
	if resp.ErrorCode != 0 {
		return kafkaError(resp.ErrorCode, fmt.Errorf("ListGroups"))
	}
	var names []string
	for _, g := range resp.Groups {
		names = append(names, g.Group)
		if v >= 4 && g.GroupState != "Empty" {
			return fmt.Errorf("state filter Empty listed %+v", g)
		}
	}
	if !slices.Contains(names, sweepCommitGroup(1)) {
		return fmt.Errorf("listed %v, not %s", names, sweepCommitGroup(1))
	}
	if v >= 4 && slices.Contains(names, "sweep-describe-v0") {
		return fmt.Errorf("a Stable group passed the Empty filter: %v", names)
	}
	return nil
}

func sweepOffsetDelete(ctx context.Context, e *sweepEnv, v int16) error {
	group := sweepCommitGroup(2)
	req := kmsg.NewPtrOffsetDeleteRequest()
	req.Group = group
	req.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: e.topic, Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
	resp, err := request[*kmsg.OffsetDeleteResponse](ctx, e, req, v)
	if err != nil {
		return err
	}
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		return fmt.Errorf("answer error %d %+v", resp.ErrorCode, resp.Topics)
	}
	if off, err := fetchCommitted(ctx, e, group, 8); err != nil || off != -1 {
		return fmt.Errorf("after OffsetDelete: offset %d, %v", off, err)
	}
	return nil
}

func sweepDeleteGroups(ctx context.Context, e *sweepEnv, v int16) error {
	group := sweepCommitGroup(3 + v)
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Groups = []string{group, "sweep-describe-v0"}
	resp, err := request[*kmsg.DeleteGroupsResponse](ctx, e, req, v)
	if err != nil {
		return err
	}
	if len(resp.Groups) != 2 || resp.Groups[0].ErrorCode != 0 || resp.Groups[1].ErrorCode != kerr.NonEmptyGroup.Code {
		return fmt.Errorf("answer %+v", resp.Groups)
	}
	if off, err := fetchCommitted(ctx, e, group, 8); err != nil || off != -1 {
		return fmt.Errorf("after DeleteGroups: offset %d, %v", off, err)
	}
	return sweepGroupState(ctx, e, group, "Dead")
}
