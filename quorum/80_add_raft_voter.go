package quorum

// AddRaftVoter (key 80, v0-v1) and RemoveRaftVoter (key 81, v0), KIP-853: an
// operator (kraftd quorum add-controller / remove-controller, or Kafka's
// kafka-metadata-quorum.sh) asks the leader to change the voter set by one voter.
// The answer waits until the VotersRecord commits (AddRaftVoter v1 with
// AckWhenCommitted false answers once it is appended). Both are flexible from v0.

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
)

const (
	addRaftVoterMaxVersion    = 1
	removeRaftVoterMaxVersion = 0
	// maxVoterChangeWaitMs caps the TimeoutMillis an AddRaftVoter may ask for.
	maxVoterChangeWaitMs = 60_000
)

// voterWaiter is a voter change waiting for its VotersRecord to commit.
type voterWaiter struct {
	epoch  int32
	offset int64
	done   chan error
}

// errVoterChangeLost: leadership moved before the voter change committed; the change
// may still commit under the next leader.
var errVoterChangeLost = errors.New("quorum: leadership changed before the voter change committed")

// AddVoter adds v to the voter set of the quorum this node leads and waits until
// the change commits (ackWhenCommitted) or is appended. A refused change is a
// *VoterChangeError.
func (n *Node) AddVoter(ctx context.Context, v VoterNode, ackWhenCommitted bool) error {
	return n.changeVoters(ctx, ackWhenCommitted, n.addVoterChange(v))
}

// addVoterChange, removeVoterChange and upgradeChange are the core calls of AddVoter,
// RemoveVoter and UpgradeKRaftVersion, run on the driver by startVoterChange.
func (n *Node) addVoterChange(v VoterNode) func() (int64, error) {
	return func() (int64, error) { return n.raft.AddVoter(n.nowMs(), v) }
}

func (n *Node) removeVoterChange(key ReplicaKey) func() (int64, error) {
	return func() (int64, error) { return n.raft.RemoveVoter(n.nowMs(), key) }
}

func (n *Node) upgradeChange(level int16, validateOnly bool) func() (int64, error) {
	return func() (int64, error) { return n.raft.UpgradeKRaftVersion(n.nowMs(), level, validateOnly) }
}

// RemoveVoter removes the voter key from the voter set of the quorum this node leads
// and waits until the change commits.
func (n *Node) RemoveVoter(ctx context.Context, key ReplicaKey) error {
	return n.changeVoters(ctx, true, n.removeVoterChange(key))
}

// UpgradeKRaftVersion raises kraft.version on the quorum this node leads
// (Raft.UpgradeKRaftVersion) and waits until the upgrade commits. A refusal is a
// *VoterChangeError.
func (n *Node) UpgradeKRaftVersion(ctx context.Context, level int16, validateOnly bool) error {
	return n.changeVoters(ctx, true, n.upgradeChange(level, validateOnly))
}

func (n *Node) changeVoters(ctx context.Context, wait bool, change func() (int64, error)) error {
	var w *voterWaiter
	var cerr error
	err := n.do(ctx, func() { w, cerr = n.startVoterChange(wait, change) })
	if err != nil {
		return err
	}
	if cerr != nil || w == nil {
		return cerr
	}
	select {
	case err := <-w.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-n.done:
		return ErrNodeStopped
	}
}

// startVoterChange is changeVoters' step on the driver: it applies change to the
// core and, with wait, registers the waiter that resolveVoterWaiters answers once
// the record commits (nil when nothing was appended). Driver goroutine only.
func (n *Node) startVoterChange(wait bool, change func() (int64, error)) (*voterWaiter, error) {
	off, err := change()
	if err != nil || !wait || off < 0 {
		return nil, err
	}
	w := &voterWaiter{epoch: n.raft.Status().Epoch, offset: off, done: make(chan error, 1)}
	n.voterWaiters = append(n.voterWaiters, w)
	return w, nil
}

// resolveVoterWaiters answers the voter changes whose record committed, and fails
// those whose leader left the epoch. Driver goroutine only (settle).
func (n *Node) resolveVoterWaiters() {
	if len(n.voterWaiters) == 0 {
		return
	}
	st := n.raft.Status()
	kept := n.voterWaiters[:0]
	for _, w := range n.voterWaiters {
		switch {
		case st.Epoch != w.epoch || (st.Role != Leader && st.Role != Resigned):
			w.done <- errVoterChangeLost
		case st.HighWatermark > w.offset || (st.Role == Resigned && st.AppliedOffset > w.offset):
			w.done <- nil
		default:
			kept = append(kept, w)
		}
	}
	clear(n.voterWaiters[len(kept):])
	n.voterWaiters = kept
}

// voterChangeCode maps a voter change's outcome to the response's error code.
func voterChangeCode(err error) (int16, *string) {
	var ve *VoterChangeError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &ve):
		return ve.Code, &ve.Message
	case errors.Is(err, errVoterChangeLost):
		msg := err.Error()
		return kerr.NotLeaderForPartition.Code, &msg
	default:
		msg := err.Error()
		return kerr.RequestTimedOut.Code, &msg
	}
}

func (n *Node) handleAddRaftVoterRPC(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
	in := req.Body.(*kmsg.AddRaftVoterRequest)
	resp := kmsg.NewPtrAddRaftVoterResponse()
	resp.Version = in.Version
	if id := derefClusterID(in.ClusterID); id != "" && n.cfg.Raft.ClusterID != "" && id != n.cfg.Raft.ClusterID {
		resp.ErrorCode = kerr.InconsistentClusterID.Code
		return resp, nil
	}
	v := VoterNode{Key: ReplicaKey{ID: in.VoterID, DirectoryID: in.VoterDirectoryID},
		KRaftVersionMin: KRaftVersionStatic, KRaftVersionMax: KRaftVersionMax}
	for _, l := range in.Listeners {
		v.Endpoints = append(v.Endpoints, Endpoint{Name: l.Name, Host: l.Host, Port: l.Port})
	}
	if in.VoterID < 0 || v.Key.DirectoryID == [16]byte{} || len(v.Endpoints) == 0 {
		resp.ErrorCode = kerr.InvalidRequest.Code
		msg := "AddRaftVoter needs a voter id, a directory id and at least one listener"
		resp.ErrorMessage = &msg
		return resp, nil
	}
	waitMs := min(max(int64(in.TimeoutMillis), 0), maxVoterChangeWaitMs)
	wctx, cancel := context.WithTimeout(ctx, time.Duration(waitMs)*time.Millisecond)
	defer cancel()
	ack := in.Version < 1 || in.AckWhenCommitted
	resp.ErrorCode, resp.ErrorMessage = voterChangeCode(n.AddVoter(wctx, v, ack))
	return resp, nil
}

func (n *Node) handleRemoveRaftVoterRPC(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
	in := req.Body.(*kmsg.RemoveRaftVoterRequest)
	resp := kmsg.NewPtrRemoveRaftVoterResponse()
	resp.Version = in.Version
	if id := derefClusterID(in.ClusterID); id != "" && n.cfg.Raft.ClusterID != "" && id != n.cfg.Raft.ClusterID {
		resp.ErrorCode = kerr.InconsistentClusterID.Code
		return resp, nil
	}
	wctx, cancel := context.WithTimeout(ctx, time.Duration(n.cfg.Raft.RequestTimeoutMs)*time.Millisecond*5)
	defer cancel()
	resp.ErrorCode, resp.ErrorMessage = voterChangeCode(n.RemoveVoter(wctx, ReplicaKey{ID: in.VoterID, DirectoryID: in.VoterDirectoryID}))
	return resp, nil
}

// KRaftVersionFeatureName is the feature kraft.version (KIP-853) in ApiVersions.
const KRaftVersionFeatureName = "kraft.version"

// DecorateApiVersions adds kraft.version to an ApiVersions answer of the controller
// listener (a protocol.ApiVersionsHook), as Kafka's controllers advertise it: the
// supported range 0-KRaftVersionMax (from v4 on: v3 and older leave out features
// whose minimum is 0) and, once above 0, the finalized level in force.
func (n *Node) DecorateApiVersions(req *protocol.Request, resp *kmsg.ApiVersionsResponse) {
	if req.Version < 3 {
		return
	}
	if req.Version >= 4 {
		sf := kmsg.NewApiVersionsResponseSupportedFeature()
		sf.Name, sf.MinVersion, sf.MaxVersion = KRaftVersionFeatureName, KRaftVersionStatic, KRaftVersionMax
		resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
	}
	if level := int16(n.kraftVersion.Load()); level > KRaftVersionStatic {
		ff := kmsg.NewApiVersionsResponseFinalizedFeature()
		ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = KRaftVersionFeatureName, level, level
		resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
	}
}
