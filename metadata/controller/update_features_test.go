package controller

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/quorum"
)

// upgradeQuorum is a fakeQuorum that also raises kraft.version (KRaftUpgrader),
// recording the calls.
type upgradeQuorum struct {
	*fakeQuorum
	calls []string
	err   error
}

func (u *upgradeQuorum) UpgradeKRaftVersion(_ context.Context, level int16, validateOnly bool) error {
	u.calls = append(u.calls, map[bool]string{false: "upgrade", true: "validate"}[validateOnly]+" "+string(rune('0'+level)))
	return u.err
}

func withKRaft(id int32, lo, hi int16) *kmsg.BrokerRegistrationRequest {
	req := registration(id)
	f := kmsg.NewBrokerRegistrationRequestFeature()
	f.Name, f.MinSupportedVersion, f.MaxSupportedVersion = quorum.KRaftVersionFeatureName, lo, hi
	req.Features = append(req.Features, f)
	return req
}

func updateFeatures(t *testing.T, c *Controller, version int16, feature string, level int16, upgradeType int8, validateOnly bool) (int16, string) {
	t.Helper()
	req := kmsg.NewPtrUpdateFeaturesRequest()
	req.Version, req.TimeoutMillis, req.ValidateOnly = version, 1000, validateOnly
	fu := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	fu.Feature, fu.MaxVersionLevel, fu.UpgradeType = feature, level, upgradeType
	req.FeatureUpdates = []kmsg.UpdateFeaturesRequestFeatureUpdate{fu}
	raw, err := c.handleUpdateFeatures(context.Background(), &protocol.Request{Key: 57, Version: version, Body: req})
	if err != nil {
		t.Fatal(err)
	}
	resp := raw.(*kmsg.UpdateFeaturesResponse)
	code, msg := resp.ErrorCode, resp.ErrorMessage
	if version < 2 {
		if len(resp.Results) != 1 || resp.Results[0].Feature != feature {
			t.Fatalf("v%d results %+v", version, resp.Results)
		}
		code, msg = resp.Results[0].ErrorCode, resp.Results[0].ErrorMessage
	}
	if msg == nil {
		return code, ""
	}
	return code, *msg
}

// TestUpdateFeaturesKRaftVersion: UpdateFeatures raises kraft.version through the
// quorum only when every registered broker supports the level (KAFKA-16538); a
// downgrade and any other feature are INVALID_UPDATE_VERSION, ValidateOnly
// validates only, and the quorum's refusals come back with their codes
// (NOT_LEADER_OR_FOLLOWER as NOT_CONTROLLER).
func TestUpdateFeaturesKRaftVersion(t *testing.T) {
	q := newFakeQuorum(true)
	u := &upgradeQuorum{fakeQuorum: q}
	c := startController(t, q, &fakeClock{}, func(cfg *Config) { cfg.Quorum = u })
	q.elect(1, 1)
	q.waitProposed(t) // the bootstrap records: the controller is active
	for _, req := range []*kmsg.BrokerRegistrationRequest{withKRaft(1, 0, 1), registration(2)} {
		if r := await(t, call(c, req)).(*kmsg.BrokerRegistrationResponse); r.ErrorCode != 0 {
			t.Fatalf("registration of %d: %s", req.BrokerID, kerr.ErrorForCode(r.ErrorCode))
		}
	}
	if code, msg := updateFeatures(t, c, 1, "kraft.version", 1, 1, false); code != kerr.InvalidUpdateVersion.Code || len(u.calls) != 0 {
		t.Fatalf("with broker 2 not listing kraft.version: %s %q, quorum calls %v", kerr.ErrorForCode(code), msg, u.calls)
	}
	if r := await(t, call(c, withKRaft(2, 0, 1))).(*kmsg.BrokerRegistrationResponse); r.ErrorCode != 0 {
		t.Fatalf("re-registration of 2: %s", kerr.ErrorForCode(r.ErrorCode))
	}
	for _, tc := range []struct {
		version     int16
		feature     string
		level       int16
		upgradeType int8
		validate    bool
		want        int16
		call        string
	}{
		{1, "kraft.version", 1, 1, true, 0, "validate 1"},
		{2, "kraft.version", 1, 1, false, 0, "upgrade 1"},
		{0, "kraft.version", 1, 0, false, 0, "upgrade 1"}, // v0: AllowDowngrade false
		{1, "kraft.version", 0, 2, false, kerr.InvalidUpdateVersion.Code, ""},
		{2, "metadata.version", 22, 1, false, kerr.InvalidUpdateVersion.Code, ""},
	} {
		u.calls = nil
		code, msg := updateFeatures(t, c, tc.version, tc.feature, tc.level, tc.upgradeType, tc.validate)
		if code != tc.want || (tc.call == "") != (len(u.calls) == 0) || tc.call != "" && u.calls[0] != tc.call {
			t.Errorf("v%d %s=%d type %d validate %t: %s %q, quorum calls %v; want %s, %q", tc.version, tc.feature, tc.level,
				tc.upgradeType, tc.validate, kerr.ErrorForCode(code), msg, u.calls, kerr.ErrorForCode(tc.want), tc.call)
		}
	}
	u.err = &quorum.VoterChangeError{Code: kerr.NotLeaderForPartition.Code, Message: "node 1 is not the leader"}
	if code, _ := updateFeatures(t, c, 1, "kraft.version", 1, 1, false); code != kerr.NotController.Code {
		t.Fatalf("off the quorum leader: %s, want NOT_CONTROLLER", kerr.ErrorForCode(code))
	}
	u.err = &quorum.VoterChangeError{Code: kerr.InvalidUpdateVersion.Code, Message: "voter 3 has not reported"}
	if code, msg := updateFeatures(t, c, 2, "kraft.version", 1, 1, false); code != kerr.InvalidUpdateVersion.Code || msg != "voter 3 has not reported" {
		t.Fatalf("a voter that has not reported: %s %q", kerr.ErrorForCode(code), msg)
	}
}
