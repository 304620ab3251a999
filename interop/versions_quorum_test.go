package interop

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The KIP-853 and feature APIs a KRaft broker forwards to the active
// controller. The sweep cluster is a static quorum (kraft.version 0) with one
// controller, which must stay as it is for the other sweepers, so each version
// is sent as a request the controller refuses for a stated reason: the answer
// still has to come back from the controller, through the broker, decoded at
// the version sent.

// sweepUpdateFeatures asks to finalize a feature kraftd does not know: the
// controller refuses it (INVALID_UPDATE_VERSION) at the top level, at every
// version, as Kafka's QuorumController answers a failed update.
func sweepUpdateFeatures(ctx context.Context, e *sweepEnv, v int16) error {
	req := kmsg.NewPtrUpdateFeaturesRequest()
	req.TimeoutMillis = 10000
	u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	u.Feature, u.MaxVersionLevel, u.UpgradeType = "kraftd.sweep.unknown", 1, 1
	req.FeatureUpdates = []kmsg.UpdateFeaturesRequestFeatureUpdate{u}
	req.ValidateOnly = v >= 1
	resp, err := request[*kmsg.UpdateFeaturesResponse](ctx, e, req, v)
	if err != nil {
		return err
	}
	code := resp.ErrorCode
	for _, r := range resp.Results {
		if r.Feature != u.Feature {
			return fmt.Errorf("result for %q, asked for %q", r.Feature, u.Feature)
		}
		if code == 0 {
			code = r.ErrorCode
		}
	}
	if code != kerr.InvalidUpdateVersion.Code {
		return fmt.Errorf("an unknown feature got %v, want INVALID_UPDATE_VERSION", kerr.ErrorForCode(code))
	}
	return nil
}

// sweepAddRaftVoter asks to add voter 99: a static quorum (kraft.version 0)
// answers UNSUPPORTED_VERSION, as Kafka's does.
func sweepAddRaftVoter(ctx context.Context, e *sweepEnv, v int16) error {
	req := kmsg.NewPtrAddRaftVoterRequest()
	req.ClusterID = &e.c.clusterID
	req.TimeoutMillis = 10000
	req.VoterID = 99
	req.VoterDirectoryID = [16]byte{9, 9, 9}
	l := kmsg.NewAddRaftVoterRequestListener()
	l.Name, l.Host, l.Port = "CONTROLLER", "127.0.0.1", 1
	req.Listeners = []kmsg.AddRaftVoterRequestListener{l}
	req.AckWhenCommitted = true
	resp, err := request[*kmsg.AddRaftVoterResponse](ctx, e, req, v)
	if err != nil {
		return err
	}
	if resp.ErrorCode != kerr.UnsupportedVersion.Code {
		return fmt.Errorf("AddRaftVoter on a static quorum got %v, want UNSUPPORTED_VERSION", kerr.ErrorForCode(resp.ErrorCode))
	}
	return nil
}

// sweepRemoveRaftVoter asks to remove voter 1 (the only one): a static quorum
// answers UNSUPPORTED_VERSION.
func sweepRemoveRaftVoter(ctx context.Context, e *sweepEnv, v int16) error {
	req := kmsg.NewPtrRemoveRaftVoterRequest()
	req.ClusterID = &e.c.clusterID
	req.VoterID = 1
	resp, err := request[*kmsg.RemoveRaftVoterResponse](ctx, e, req, v)
	if err != nil {
		return err
	}
	if resp.ErrorCode != kerr.UnsupportedVersion.Code {
		return fmt.Errorf("RemoveRaftVoter on a static quorum got %v, want UNSUPPORTED_VERSION", kerr.ErrorForCode(resp.ErrorCode))
	}
	return nil
}
