package controller

import (
	"context"
	"fmt"
	"strings"
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
	fu := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	fu.Feature, fu.MaxVersionLevel, fu.UpgradeType = feature, level, upgradeType
	fu.AllowDowngrade = version == 0 && upgradeType >= 2
	return updateFeaturesAll(t, c, version, validateOnly, fu)
}

// updateFeaturesAll sends one UpdateFeatures with updates and checks the answer's
// shape (Kafka's QuorumController): an error at the top level with no results at
// every version; on success one NONE result per feature at v0 and v1, none at v2.
func updateFeaturesAll(t *testing.T, c *Controller, version int16, validateOnly bool, updates ...kmsg.UpdateFeaturesRequestFeatureUpdate) (int16, string) {
	t.Helper()
	req := kmsg.NewPtrUpdateFeaturesRequest()
	req.Version, req.TimeoutMillis, req.ValidateOnly = version, 1000, validateOnly
	req.FeatureUpdates = updates
	raw, err := c.handleUpdateFeatures(context.Background(), &protocol.Request{Key: 57, Version: version, Body: req})
	if err != nil {
		t.Fatal(err)
	}
	resp := raw.(*kmsg.UpdateFeaturesResponse)
	if resp.ErrorCode != 0 {
		if len(resp.Results) != 0 || resp.ErrorMessage == nil {
			t.Fatalf("v%d error %s with results %+v, message %v", version, kerr.ErrorForCode(resp.ErrorCode), resp.Results, resp.ErrorMessage)
		}
		return resp.ErrorCode, *resp.ErrorMessage
	}
	want := 0
	if version < 2 {
		want = len(updates)
	}
	if len(resp.Results) != want {
		t.Fatalf("v%d success with results %+v", version, resp.Results)
	}
	for i, r := range resp.Results {
		if r.Feature != updates[i].Feature || r.ErrorCode != 0 {
			t.Fatalf("v%d result %+v for %s", version, r, updates[i].Feature)
		}
	}
	return 0, ""
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
	if code, msg := updateFeatures(t, c, 2, "kraft.version", 1, 1, false); code != kerr.InvalidUpdateVersion.Code || !strings.HasSuffix(msg, "had an error: voter 3 has not reported") {
		t.Fatalf("a voter that has not reported: %s %q", kerr.ErrorForCode(code), msg)
	}
}

func fu(name string, level int16, upgradeType int8) kmsg.UpdateFeaturesRequestFeatureUpdate {
	fu := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	fu.Feature, fu.MaxVersionLevel, fu.UpgradeType = name, level, upgradeType
	return fu
}

func withMetadataVersions(id int32, lo, hi int16) *kmsg.BrokerRegistrationRequest {
	req := registration(id)
	req.Features[0].MinSupportedVersion, req.Features[0].MaxSupportedVersion = lo, hi
	return req
}

// TestUpdateFeaturesMetadataVersion: UpdateFeatures changes metadata.version as
// Kafka's FeatureControlManager: only to a level this controller, every registered
// broker and every other controller support (each refusal names who does not);
// a downgrade needs a downgrade type and is refused when a level in between changed
// the record formats (unsafe ones are not supported); ValidateOnly writes nothing;
// features kraftd implements only at level 0 cannot be finalized higher, an unknown
// feature not at all; a request fails as a whole, writing nothing, when one of its
// updates fails.
func TestUpdateFeaturesMetadataVersion(t *testing.T) {
	q := newFakeQuorum(true)
	var peers []ControllerSupport
	c := startController(t, q, &fakeClock{}, func(cfg *Config) {
		cfg.OtherControllers = func(context.Context) []ControllerSupport { return peers }
	})
	q.elect(1, 1)
	q.waitProposed(t)
	for _, req := range []*kmsg.BrokerRegistrationRequest{withMetadataVersions(1, 7, 21), withMetadataVersions(2, 7, 15)} {
		if r := await(t, call(c, req)).(*kmsg.BrokerRegistrationResponse); r.ErrorCode != 0 {
			t.Fatalf("registration of %d: %s", req.BrokerID, kerr.ErrorForCode(r.ErrorCode))
		}
	}
	mv := func() int16 {
		img, _ := c.CommittedImage()
		return img.MetadataVersion()
	}
	if mv() != mv36IV2 {
		t.Fatalf("bootstrap metadata.version %d", mv())
	}
	refused := func(what string, want string, version int16, validate bool, updates ...kmsg.UpdateFeaturesRequestFeatureUpdate) {
		t.Helper()
		before := mv()
		code, msg := updateFeaturesAll(t, c, version, validate, updates...)
		if code != kerr.InvalidUpdateVersion.Code || !strings.HasSuffix(msg, "had an error: "+want) {
			t.Errorf("%s: %s %q, want INVALID_UPDATE_VERSION ending %q", what, kerr.ErrorForCode(code), msg, want)
		}
		if mv() != before {
			t.Errorf("%s: metadata.version moved %d -> %d", what, before, mv())
		}
	}
	refused("above this controller", "Invalid update version 17 for feature metadata.version. Local controller 1 only supports versions 1-16",
		2, false, fu("metadata.version", 17, 1))
	refused("above broker 2", "Invalid update version 16 for feature metadata.version. Broker 2 only supports versions 7-15",
		1, false, fu("metadata.version", 16, 1))
	if r := await(t, call(c, withMetadataVersions(2, 7, 21))).(*kmsg.BrokerRegistrationResponse); r.ErrorCode != 0 {
		t.Fatalf("re-registration of 2: %s", kerr.ErrorForCode(r.ErrorCode))
	}
	peers = []ControllerSupport{{ID: 2, Features: map[string]FeatureRange{"metadata.version": {1, 15}}}}
	refused("above controller 2", "Invalid update version 16 for feature metadata.version. Controller 2 only supports versions 1-15",
		2, false, fu("metadata.version", 16, 1))
	peers = []ControllerSupport{{ID: 3, Err: context.DeadlineExceeded}}
	refused("controller 3 unreachable", "Invalid update version 16 for feature metadata.version. Controller 3 could not be asked which versions it supports (context deadline exceeded), and may not support this feature.",
		2, false, fu("metadata.version", 16, 1))
	peers = []ControllerSupport{{ID: 2, Features: map[string]FeatureRange{"metadata.version": {1, 16}}}}
	refused("an upgrade typed as a downgrade", "Invalid update version 16 for feature metadata.version. Can't downgrade to a newer version.",
		1, false, fu("metadata.version", 16, 2))
	refused("a feature kraftd implements only at 0", "Invalid update version 1 for feature transaction.version. Local controller 1 does not support this feature.",
		2, false, fu("transaction.version", 1, 1))
	refused("an unknown feature", "Invalid update version 0 for feature kraftd.unknown. Feature kraftd.unknown not found.",
		2, false, fu("kraftd.unknown", 0, 1))
	refused("an upgrade next to a refused update", "Invalid update version 2 for feature group.version. Local controller 1 does not support this feature.",
		1, false, fu("metadata.version", 16, 1), fu("group.version", 2, 1))

	if code, msg := updateFeaturesAll(t, c, 1, true, fu("metadata.version", 16, 1)); code != 0 || mv() != mv36IV2 {
		t.Fatalf("validate-only upgrade: %s %q, metadata.version %d", kerr.ErrorForCode(code), msg, mv())
	}
	if code, msg := updateFeaturesAll(t, c, 1, false, fu("metadata.version", 16, 1), fu("group.version", 0, 1)); code != 0 || mv() != 16 {
		t.Fatalf("upgrade to 3.7-IV1: %s %q, metadata.version %d", kerr.ErrorForCode(code), msg, mv())
	}
	refused("a downgrade typed as an upgrade", "Invalid update version 15 for feature metadata.version. Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade.",
		2, false, fu("metadata.version", 15, 1))
	if code, msg := updateFeatures(t, c, 0, "metadata.version", 15, 2, false); code != 0 || mv() != 15 {
		t.Fatalf("safe downgrade 3.7-IV1 -> 3.7-IV0 (no format change): %s %q, metadata.version %d", kerr.ErrorForCode(code), msg, mv())
	}
	refused("a downgrade across a format change", "Invalid metadata.version 14. Refusing to perform the requested downgrade because it might delete metadata information.",
		2, false, fu("metadata.version", 14, 2))
	refused("an unsafe downgrade", "Invalid metadata.version 14. Unsafe metadata downgrade is not supported in this version.",
		2, false, fu("metadata.version", 14, 3))
	refused("below 3.3-IV0", "Invalid update version 3 for feature metadata.version. Broker 1 only supports versions 7-21",
		2, false, fu("metadata.version", 3, 2))
	img, _ := c.CommittedImage()
	for _, f := range img.Features() {
		if f.Name != "metadata.version" {
			t.Errorf("finalized %s=%d: kraftd implements no level above 0 of it", f.Name, f.Level)
		}
	}
}

// TestControllerApiVersionsFeatures: the controller listener's ApiVersions lists
// the metadata.version range this controller supports and the finalized features of
// its committed image, with the image's offset as the epoch (v3+); v2 has neither.
func TestControllerApiVersionsFeatures(t *testing.T) {
	q := newFakeQuorum(true)
	c := startController(t, q, &fakeClock{})
	q.elect(1, 1)
	q.waitProposed(t)
	waitFor(t, func() bool { img, _ := c.CommittedImage(); return img.MetadataVersion() != 0 })
	_, offset := c.CommittedImage()
	resp := kmsg.NewPtrApiVersionsResponse()
	c.DecorateApiVersions(&protocol.Request{Key: 18, Version: 3}, resp)
	if len(resp.SupportedFeatures) != 1 || resp.SupportedFeatures[0].Name != "metadata.version" ||
		resp.SupportedFeatures[0].MinVersion != MinMetadataVersion || resp.SupportedFeatures[0].MaxVersion != 16 {
		t.Fatalf("supported features %+v", resp.SupportedFeatures)
	}
	if len(resp.FinalizedFeatures) != 1 || resp.FinalizedFeatures[0].MaxVersionLevel != mv36IV2 || resp.FinalizedFeaturesEpoch < offset {
		t.Fatalf("finalized features %+v at %d, want metadata.version %d at >= %d", resp.FinalizedFeatures, resp.FinalizedFeaturesEpoch, mv36IV2, offset)
	}
	old := kmsg.NewPtrApiVersionsResponse()
	c.DecorateApiVersions(&protocol.Request{Key: 18, Version: 2}, old)
	if len(old.SupportedFeatures)+len(old.FinalizedFeatures) != 0 {
		t.Fatalf("v2 answer with features: %+v", old)
	}
}

// TestUpdateFeaturesKRaftVersionWithOthers: kraft.version next to other features in
// one request: a refusal of one of the others leaves kraft.version alone (the
// quorum is not asked); with the others valid both are applied.
func TestUpdateFeaturesKRaftVersionWithOthers(t *testing.T) {
	q := newFakeQuorum(true)
	u := &upgradeQuorum{fakeQuorum: q}
	c := startController(t, q, &fakeClock{}, func(cfg *Config) { cfg.Quorum = u })
	q.elect(1, 1)
	q.waitProposed(t)
	if r := await(t, call(c, withKRaft(1, 0, 1))).(*kmsg.BrokerRegistrationResponse); r.ErrorCode != 0 {
		t.Fatalf("registration: %s", kerr.ErrorForCode(r.ErrorCode))
	}
	code, msg := updateFeaturesAll(t, c, 2, false, fu("kraft.version", 1, 1), fu("transaction.version", 1, 1))
	if code != kerr.InvalidUpdateVersion.Code || !strings.Contains(msg, "transaction.version") || len(u.calls) != 0 {
		t.Fatalf("kraft.version next to a refused update: %s %q, quorum calls %v", kerr.ErrorForCode(code), msg, u.calls)
	}
	if code, msg := updateFeaturesAll(t, c, 1, false, fu("metadata.version", 15, 1), fu("kraft.version", 1, 1)); code != 0 ||
		len(u.calls) != 1 || u.calls[0] != "upgrade 1" {
		t.Fatalf("kraft.version next to metadata.version: %s %q, quorum calls %v", kerr.ErrorForCode(code), msg, u.calls)
	}
	if img, _ := c.CommittedImage(); img.MetadataVersion() != 15 {
		t.Fatalf("metadata.version %d after the combined upgrade", img.MetadataVersion())
	}
}

// TestUpdateFeaturesHostileInput: what a client sends in UpdateFeatures is
// untrusted. A feature named twice is INVALID_REQUEST; ten thousand unknown
// features, a negative level and an unknown upgrade type are refused; none of
// them asks the other controllers or appends a record.
func TestUpdateFeaturesHostileInput(t *testing.T) {
	q := newFakeQuorum(true)
	asked := 0
	c := startController(t, q, &fakeClock{}, func(cfg *Config) {
		cfg.OtherControllers = func(context.Context) []ControllerSupport { asked++; return nil }
	})
	q.elect(1, 1)
	q.waitProposed(t)
	if r := await(t, call(c, withMetadataVersions(1, 7, 21))).(*kmsg.BrokerRegistrationResponse); r.ErrorCode != 0 {
		t.Fatalf("registration: %s", kerr.ErrorForCode(r.ErrorCode))
	}
	q.waitProposed(t)
	before, _ := c.CommittedImage()
	upd := func(feature string, level int16, typ int8) kmsg.UpdateFeaturesRequestFeatureUpdate {
		u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
		u.Feature, u.MaxVersionLevel, u.UpgradeType = feature, level, typ
		return u
	}
	mv := upd("metadata.version", mv36IV2+1, 1)
	if code, msg := updateFeaturesAll(t, c, 1, false, mv, mv); code != kerr.InvalidRequest.Code {
		t.Errorf("metadata.version twice: %s %q, want INVALID_REQUEST", kerr.ErrorForCode(code), msg)
	}
	many := make([]kmsg.UpdateFeaturesRequestFeatureUpdate, 10000)
	for i := range many {
		many[i] = upd(fmt.Sprintf("no.such.feature.%d", i), 1, 1)
	}
	if code, msg := updateFeaturesAll(t, c, 1, false, many...); code != kerr.InvalidUpdateVersion.Code || !strings.Contains(msg, "no.such.feature.0") {
		t.Errorf("10000 unknown features: %s %q, want INVALID_UPDATE_VERSION naming no.such.feature.0", kerr.ErrorForCode(code), msg)
	}
	if asked != 0 {
		t.Errorf("unknown features made the controller ask the other controllers %d times", asked)
	}
	if code, msg := updateFeaturesAll(t, c, 1, false, upd("metadata.version", -5, 1)); code == 0 {
		t.Errorf("metadata.version -5 accepted: %q", msg)
	}
	if code, msg := updateFeaturesAll(t, c, 1, false, upd("metadata.version", mv36IV2+1, 9)); code == 0 {
		t.Errorf("upgrade type 9 accepted: %q", msg)
	}
	after, _ := c.CommittedImage()
	if after.MetadataVersion() != before.MetadataVersion() || after.Provenance().Offset != before.Provenance().Offset {
		t.Fatalf("refused updates changed the image: metadata.version %d -> %d, offset %d -> %d",
			before.MetadataVersion(), after.MetadataVersion(), before.Provenance().Offset, after.Provenance().Offset)
	}
}
