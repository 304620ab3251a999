package controller

// UpdateFeatures, API key 57, versions 0-2 (v1 ValidateOnly and UpgradeType, v2
// answers with the top-level error only), on the controller listener, as
// kafka-features.sh --bootstrap-controller sends it.
//
// kraftd changes one feature this way: kraft.version, from 0 to 1 (KAFKA-16538):
// allowed once every registered broker supports the level (its registration lists
// kraft.version with the level in range; a broker that lists no kraft.version
// supports only 0) and every voter has reported its directory id and listeners to
// the quorum leader (quorum.Node.UpgradeKRaftVersion, which writes the
// KRaftVersionRecord and VotersRecord and answers once they commit). A downgrade is
// INVALID_UPDATE_VERSION, as Kafka refuses to downgrade kraft.version; any other
// feature (metadata.version upgrades are not implemented) is INVALID_UPDATE_VERSION
// with a message saying so. Off the quorum leader the answer is NOT_CONTROLLER.
// Raising metadata.version never touches kraft.version.
//
// The request is served on the connection's goroutine, not the event loop: it reads
// the committed image and waits on the quorum, which the loop must never do.

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

// UpgradeType values of UpdateFeatures v1+.
const (
	featureUpgrade int8 = 1
)

func (c *Controller) handleUpdateFeatures(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
	in := req.Body.(*kmsg.UpdateFeaturesRequest)
	resp := kmsg.NewPtrUpdateFeaturesResponse()
	resp.Version = in.Version
	wait := min(max(time.Duration(in.TimeoutMillis)*time.Millisecond, time.Second), maxFeatureUpdateWait)
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	seen := map[string]bool{}
	var firstCode int16
	var firstMsg *string
	for _, u := range in.FeatureUpdates {
		code, msg := int16(0), ""
		if seen[u.Feature] {
			code, msg = kerr.InvalidRequest.Code, fmt.Sprintf("feature %s appears twice", u.Feature)
		} else {
			seen[u.Feature] = true
			code, msg = c.updateFeature(wctx, in, u)
		}
		var mp *string
		if code != 0 {
			mp = kmsg.StringPtr(msg)
			if firstCode == 0 {
				firstCode, firstMsg = code, mp
			}
		}
		if in.Version < 2 {
			r := kmsg.NewUpdateFeaturesResponseResult()
			r.Feature, r.ErrorCode, r.ErrorMessage = u.Feature, code, mp
			resp.Results = append(resp.Results, r)
		}
	}
	if in.Version >= 2 {
		resp.ErrorCode, resp.ErrorMessage = firstCode, firstMsg
	}
	return resp, nil
}

// updateFeature applies one FeatureUpdate and returns its error code and message.
func (c *Controller) updateFeature(ctx context.Context, in *kmsg.UpdateFeaturesRequest, u kmsg.UpdateFeaturesRequestFeatureUpdate) (int16, string) {
	downgrade := u.AllowDowngrade
	if in.Version >= 1 {
		downgrade = u.UpgradeType != featureUpgrade
	}
	if u.Feature != quorum.KRaftVersionFeatureName {
		return kerr.InvalidUpdateVersion.Code, fmt.Sprintf("kraftd does not change feature %s through UpdateFeatures", u.Feature)
	}
	if downgrade {
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
	err := up.UpgradeKRaftVersion(ctx, u.MaxVersionLevel, in.Version >= 1 && in.ValidateOnly)
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
