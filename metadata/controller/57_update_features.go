package controller

// UpdateFeatures, API key 57, versions 0-2 (v1 ValidateOnly and UpgradeType, v2
// answers with the top-level error only), on the controller listener, as
// kafka-features.sh --bootstrap-controller sends it (and brokers forward it).
//
// Two kinds of feature:
//   - metadata.version and the features kraftd knows only at level 0
//     (transaction.version, group.version): checked and written by the event loop
//     as Kafka's FeatureControlManager (features.go): FeatureLevelRecords, all in
//     one atomic batch, answered once they commit. Whether the other controllers
//     support the level is asked here, off the loop, first
//     (Config.OtherControllers).
//   - kraft.version, from 0 to 1 (KAFKA-16538): allowed once every registered
//     broker supports the level (its registration lists kraft.version with the
//     level in range; a broker that lists no kraft.version supports only 0) and
//     every voter has reported its directory id and listeners to the quorum leader
//     (quorum.Node.UpgradeKRaftVersion, which writes the KRaftVersionRecord and
//     VotersRecord and answers once they commit). A downgrade is
//     INVALID_UPDATE_VERSION, as Kafka refuses to downgrade kraft.version.
//
// Every update is validated before anything is written; an update of kraft.version
// next to others is applied first, then the others (two appends: the quorum's and
// the controller's). Answers are Kafka's QuorumController's: an error fails every
// update, at the top level at every version, its message prefixed with "The update
// failed for all features since the following feature had an error: "; on success
// v0 and v1 list every feature with NONE. Off the quorum leader the answer is
// NOT_CONTROLLER. Raising metadata.version never touches kraft.version.
//
// The request is served on the connection's goroutine: it asks the other
// controllers and waits on the quorum, which the loop must never do; the records
// are decided and written by the loop.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/quorum"
)

const updateFeaturesMaxVersion = 2

// maxFeatureUpdateWait caps the TimeoutMillis an UpdateFeatures may ask for.
const maxFeatureUpdateWait = 60 * time.Second

// KRaftUpgrader is the part of quorum.Node that raises kraft.version; a Quorum
// that also implements it lets UpdateFeatures change kraft.version.
type KRaftUpgrader interface {
	UpgradeKRaftVersion(ctx context.Context, level int16, validateOnly bool) error
}

func (c *Controller) handleUpdateFeatures(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
	in := req.Body.(*kmsg.UpdateFeaturesRequest)
	wait := min(max(time.Duration(in.TimeoutMillis)*time.Millisecond, time.Second), maxFeatureUpdateWait)
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	seen := map[string]bool{}
	var kraft *kmsg.UpdateFeaturesRequestFeatureUpdate
	var others []kmsg.UpdateFeaturesRequestFeatureUpdate
	for i, u := range in.FeatureUpdates {
		if seen[u.Feature] {
			return featuresResponse(in, kerr.InvalidRequest.Code, fmt.Sprintf("feature %s appears twice", u.Feature)), nil
		}
		seen[u.Feature] = true
		if u.Feature == quorum.KRaftVersionFeatureName {
			kraft = &in.FeatureUpdates[i]
		} else {
			others = append(others, u)
		}
	}
	validateOnly := in.Version >= 1 && in.ValidateOnly
	fu := &featureUpdate{UpdateFeaturesRequest: in, updates: others, peers: c.otherControllers(wctx, others)}
	if kraft != nil && len(others) > 0 {
		// Check the others first, writing nothing, so a refusal of one of them
		// leaves kraft.version untouched too.
		check := *in
		check.Version, check.ValidateOnly = max(in.Version, 1), true
		vfu := *fu
		vfu.UpdateFeaturesRequest = &check
		if resp, err := c.submitFeatures(wctx, &vfu); err != nil || resp.ErrorCode != 0 {
			return asRequested(in, resp), err
		}
	}
	if kraft != nil {
		if code, msg := c.updateKRaftVersion(wctx, in, *kraft, validateOnly); code != 0 {
			return featuresResponse(in, code, msg), nil
		}
	}
	if len(others) == 0 {
		return featuresResponse(in, 0, ""), nil
	}
	return c.submitFeatures(wctx, fu)
}

// submitFeatures hands fu to the loop and waits for its answer.
func (c *Controller) submitFeatures(ctx context.Context, fu *featureUpdate) (*kmsg.UpdateFeaturesResponse, error) {
	raw, err := c.submit(ctx, fu)
	if err != nil {
		return nil, err
	}
	return raw.(*kmsg.UpdateFeaturesResponse), nil
}

// asRequested re-versions an answer to the validation pass for the request.
func asRequested(in *kmsg.UpdateFeaturesRequest, resp *kmsg.UpdateFeaturesResponse) *kmsg.UpdateFeaturesResponse {
	if resp == nil {
		return nil
	}
	out := featuresResponse(in, resp.ErrorCode, "")
	out.ErrorMessage = resp.ErrorMessage
	return out
}

// updateKRaftVersion checks and applies a kraft.version update and returns its
// error code and message.
func (c *Controller) updateKRaftVersion(ctx context.Context, in *kmsg.UpdateFeaturesRequest, u kmsg.UpdateFeaturesRequestFeatureUpdate, validateOnly bool) (int16, string) {
	if upgradeTypeOf(in.Version, u) != featureUpgrade {
		return kerr.InvalidUpdateVersion.Code, fmt.Sprintf("kraft.version cannot be downgraded (to %d)", u.MaxVersionLevel)
	}
	up, ok := c.cfg.Quorum.(KRaftUpgrader)
	if !ok {
		return kerr.InvalidUpdateVersion.Code, "this controller's quorum cannot change kraft.version"
	}
	img, _ := c.CommittedImage()
	for _, b := range img.Brokers() {
		lo, hi := int16(0), int16(0)
		for _, f := range b.Features {
			if f.Name == quorum.KRaftVersionFeatureName {
				lo, hi = f.MinSupportedVersion, f.MaxSupportedVersion
			}
		}
		if u.MaxVersionLevel < lo || u.MaxVersionLevel > hi {
			return kerr.InvalidUpdateVersion.Code, fmt.Sprintf("broker %d supports kraft.version %d-%d, not %d",
				b.ID, lo, hi, u.MaxVersionLevel)
		}
	}
	err := up.UpgradeKRaftVersion(ctx, u.MaxVersionLevel, validateOnly)
	var ve *quorum.VoterChangeError
	switch {
	case err == nil:
		return 0, ""
	case errors.As(err, &ve) && ve.Code == kerr.NotLeaderForPartition.Code:
		return kerr.NotController.Code, ve.Message
	case errors.As(err, &ve):
		return ve.Code, ve.Message
	case errors.Is(err, quorum.ErrNotLeader):
		return kerr.NotController.Code, err.Error()
	default:
		return kerr.RequestTimedOut.Code, err.Error()
	}
}
