package controller

// Finalized features (KIP-584) that the controller changes through UpdateFeatures:
// metadata.version and the features kraftd knows but implements only at level 0.
// kraft.version is the quorum's (KAFKA-16538, 57_update_features.go). The rules are
// Kafka's FeatureControlManager.updateFeature and QuorumFeatures.reasonNotSupported:
//   - the new level must be in the range this controller supports, in every
//     registered broker's range and in every other controller's (which kraftd asks
//     with ApiVersions on its controller listener, Config.OtherControllers, as Kafka
//     did before controllers registered themselves in 3.7);
//   - a lower level needs a downgrade upgrade type, a higher one the upgrade type;
//   - metadata.version: not below 3.3-IV0 (the first with FeatureLevelRecord), and a
//     downgrade only when no level between the two changed the record formats
//     (MetadataVersion.checkIfMetadataChanged); unsafe downgrades are not supported,
//     as in Kafka;
//   - every update of the request is checked before any record is written, and the
//     records of all of them are written in one atomic batch.
// kraftd never finalizes a level it does not implement: its supported ranges are
// what the controller replays and writes correctly (metadata.version up to
// 3.7-IV1, the last level before KIP-858's directory assignment).

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/metadata/records"
	"github.com/kraftd/kraftd/protocol"
)

// FeatureRange is a supported range of feature levels, both ends included.
type FeatureRange struct {
	Min, Max int16
}

// disabledFeature is the range of a feature a node does not list: level 0 only
// (Kafka's QuorumFeatures.DISABLED).
var disabledFeature = FeatureRange{}

func (r FeatureRange) contains(level int16) bool { return level >= r.Min && level <= r.Max }

// String prints the range as Kafka's VersionRange does: "3" or "1-16".
func (r FeatureRange) String() string {
	if r.Min == r.Max {
		return fmt.Sprint(r.Min)
	}
	return fmt.Sprintf("%d-%d", r.Min, r.Max)
}

// Metadata versions this controller supports: from 3.0-IV1 (Kafka's
// MINIMUM_KRAFT_VERSION; logs that old are replayed) to 3.7-IV1.
// MinBootstrapMetadataVersion is the lowest level UpdateFeatures may set (3.3-IV0,
// the first with FeatureLevelRecord: Kafka's MINIMUM_BOOTSTRAP_VERSION).
const (
	MinMetadataVersion          int16 = 1
	MaxMetadataVersion                = mv37IV2 - 1
	MinBootstrapMetadataVersion       = mvMin
)

// SupportedFeatures are the feature ranges this controller supports, as it
// advertises them in ApiVersions; kraft.version is the quorum's and is not listed.
func SupportedFeatures() map[string]FeatureRange {
	return map[string]FeatureRange{image.MetadataVersionFeature: {MinMetadataVersion, MaxMetadataVersion}}
}

// knownFeatures are the features Kafka defines through 3.9 besides metadata.version
// and kraft.version (Kafka's Features enum). kraftd implements none of their levels
// above 0: they may only be set to 0 (disable --feature), never finalized higher.
var knownFeatures = []string{"group.version", "transaction.version"}

// ControllerSupport is what another controller of the quorum said it supports in
// ApiVersions (SupportedFeatures), or why it could not be asked.
type ControllerSupport struct {
	ID       int32
	Features map[string]FeatureRange
	Err      error
}

// Upgrade types of UpdateFeatures v1+ (v0's AllowDowngrade maps to the first two).
const (
	featureUpgrade         int8 = 1
	featureSafeDowngrade   int8 = 2
	featureUnsafeDowngrade int8 = 3
)

// featureUpdate is an UpdateFeatures request as the loop sees it: the updates of
// features the controller owns (kraft.version left out) and what the other
// controllers support, asked off the loop before. It is a kmsg.Request through the
// embedded request, so error answers are built as for any other.
type featureUpdate struct {
	*kmsg.UpdateFeaturesRequest
	updates []kmsg.UpdateFeaturesRequestFeatureUpdate
	peers   []ControllerSupport
}

// upgradeTypeOf is the upgrade type of u in a request of version v.
func upgradeTypeOf(v int16, u kmsg.UpdateFeaturesRequestFeatureUpdate) int8 {
	if v >= 1 {
		return u.UpgradeType
	}
	if u.AllowDowngrade {
		return featureSafeDowngrade
	}
	return featureUpgrade
}

// updateFeatures checks every update against the pending image and returns the
// FeatureLevelRecords (none when ValidateOnly) and an UpdateFeatures response with
// the first refusal, if any.
func (c *core) updateFeatures(fu *featureUpdate) Result {
	var recs []records.Record
	for _, u := range fu.updates {
		rec, err := c.updateFeature(fu, u)
		if err != nil {
			return Result{Response: featuresResponse(fu.UpdateFeaturesRequest, kerr.InvalidUpdateVersion.Code, err.Error())}
		}
		if rec != nil {
			recs = append(recs, records.Record{Message: rec})
		}
	}
	if fu.Version >= 1 && fu.ValidateOnly {
		recs = nil
	}
	return Result{Records: recs, Response: featuresResponse(fu.UpdateFeaturesRequest, 0, "")}
}

// updateFeature checks one update in Kafka's order and returns the record that
// applies it.
func (c *core) updateFeature(fu *featureUpdate, u kmsg.UpdateFeaturesRequestFeatureUpdate) (*records.FeatureLevelRecord, error) {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("Invalid update version %d for feature %s. %s", u.MaxVersionLevel, u.Feature, fmt.Sprintf(format, args...))
	}
	typ := upgradeTypeOf(fu.Version, u)
	if typ < featureUpgrade || typ > featureUnsafeDowngrade {
		return nil, invalid("The controller does not support the given upgrade type.")
	}
	img := c.pending.img
	cur, _ := img.Feature(u.Feature)
	if u.MaxVersionLevel < 0 {
		return nil, invalid("A feature version cannot be less than 0.")
	}
	if reason := c.reasonNotSupported(img, fu.peers, u.Feature, u.MaxVersionLevel); reason != "" {
		return nil, invalid("%s", reason)
	}
	switch {
	case u.MaxVersionLevel < cur && typ == featureUpgrade:
		return nil, invalid("Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade.")
	case u.MaxVersionLevel > cur && typ != featureUpgrade:
		return nil, invalid("Can't downgrade to a newer version.")
	}
	rec := &records.FeatureLevelRecord{Name: u.Feature, FeatureLevel: u.MaxVersionLevel}
	if u.Feature == image.MetadataVersionFeature {
		return rec, checkMetadataVersionChange(cur, u.MaxVersionLevel, typ == featureUnsafeDowngrade)
	}
	if !slices.Contains(knownFeatures, u.Feature) {
		return nil, invalid("Feature %s not found.", u.Feature)
	}
	return rec, nil
}

// checkMetadataVersionChange is Kafka's FeatureControlManager.updateMetadataVersion.
func checkMetadataVersionChange(cur, next int16, unsafe bool) error {
	invalid := func(msg string) error { return fmt.Errorf("Invalid metadata.version %d. %s", next, msg) }
	switch {
	case next < MinBootstrapMetadataVersion:
		return invalid("Unable to set a metadata.version less than " + image.MetadataVersionName(MinBootstrapMetadataVersion))
	case next < cur && image.MetadataChangedBetween(next, cur) && unsafe:
		return invalid("Unsafe metadata downgrade is not supported in this version.")
	case next < cur && image.MetadataChangedBetween(next, cur):
		return invalid("Refusing to perform the requested downgrade because it might delete metadata information.")
	}
	return nil
}

// reasonNotSupported is Kafka's QuorumFeatures.reasonNotSupported over this
// controller, every registered broker and the other controllers: "" when all of
// them support level.
func (c *core) reasonNotSupported(img *image.Image, peers []ControllerSupport, feature string, level int16) string {
	local, ok := SupportedFeatures()[feature]
	if !ok {
		local = disabledFeature
	}
	if r := rangeReason(fmt.Sprintf("Local controller %d", c.cfg.NodeID), local, level); r != "" {
		return r
	}
	for _, b := range img.Brokers() {
		rng := disabledFeature
		for _, f := range b.Features {
			if f.Name == feature {
				rng = FeatureRange{f.MinSupportedVersion, f.MaxSupportedVersion}
			}
		}
		if r := rangeReason(fmt.Sprintf("Broker %d", b.ID), rng, level); r != "" {
			return r
		}
	}
	for _, p := range peers {
		if p.Err != nil {
			return fmt.Sprintf("Controller %d could not be asked which versions it supports (%v), and may not support this feature.", p.ID, p.Err)
		}
		rng, ok := p.Features[feature]
		if !ok {
			rng = disabledFeature
		}
		if r := rangeReason(fmt.Sprintf("Controller %d", p.ID), rng, level); r != "" {
			return r
		}
	}
	return ""
}

func rangeReason(what string, r FeatureRange, level int16) string {
	switch {
	case r.contains(level):
		return ""
	case r.Max == 0:
		return what + " does not support this feature."
	}
	return what + " only supports versions " + r.String()
}

// featuresResponse is the UpdateFeatures answer as Kafka's QuorumController builds
// it: an error fails every update, at the top level, with the message saying which;
// on success versions 0 and 1 list each feature with NONE.
func featuresResponse(req *kmsg.UpdateFeaturesRequest, code int16, msg string) *kmsg.UpdateFeaturesResponse {
	resp := kmsg.NewPtrUpdateFeaturesResponse()
	resp.Version = req.Version
	if code != 0 {
		resp.ErrorCode = code
		resp.ErrorMessage = kmsg.StringPtr("The update failed for all features since the following feature had an error: " + msg)
		return resp
	}
	if req.Version <= 1 {
		for _, u := range req.FeatureUpdates {
			r := kmsg.NewUpdateFeaturesResponseResult()
			r.Feature = u.Feature
			resp.Results = append(resp.Results, r)
		}
	}
	return resp
}

// DecorateApiVersions adds the controller's features to an ApiVersions answer of
// the controller listener (a protocol.ApiVersionsHook), as Kafka's controllers
// advertise them: the supported metadata.version range (v3+) and the finalized
// features of the committed image, with its last offset as FinalizedFeaturesEpoch.
// An operator asking a controller (kraftd features describe
// --bootstrap-controller) sees the quorum's committed view, not a broker's
// possibly older one. kraft.version is added by the quorum's hook.
func (c *Controller) DecorateApiVersions(req *protocol.Request, resp *kmsg.ApiVersionsResponse) {
	if req.Version < 3 {
		return
	}
	for _, name := range []string{image.MetadataVersionFeature} {
		r := SupportedFeatures()[name]
		sf := kmsg.NewApiVersionsResponseSupportedFeature()
		sf.Name, sf.MinVersion, sf.MaxVersion = name, r.Min, r.Max
		resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
	}
	img, offset := c.CommittedImage()
	resp.FinalizedFeaturesEpoch = offset
	for _, f := range img.Features() {
		ff := kmsg.NewApiVersionsResponseFinalizedFeature()
		ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = f.Name, f.Level, f.Level
		resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
	}
}

// otherControllers asks the other controllers what they support, when an update
// needs it: one that raises a feature this controller knows (Config.OtherControllers;
// nil asks none). A request that names only unknown features, or only lowers
// levels, is answered without a round of calls to the others.
func (c *Controller) otherControllers(ctx context.Context, updates []kmsg.UpdateFeaturesRequestFeatureUpdate) []ControllerSupport {
	if c.cfg.OtherControllers == nil {
		return nil
	}
	known := SupportedFeatures()
	for _, u := range updates {
		if _, ok := known[u.Feature]; ok && u.MaxVersionLevel > 0 {
			return c.cfg.OtherControllers(ctx)
		}
	}
	return nil
}
