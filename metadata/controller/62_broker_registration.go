package controller

// BrokerRegistration, API key 62, versions 0-4 (KIP-631; v1 IsMigratingZkBroker,
// v2 LogDirs (KIP-858), v3 PreviousBrokerEpoch (KIP-966), v4 keeps features
// whose min is 0).
//
// A broker registers once per process start with a random incarnation id.
//
//   - ClusterID must be ours: INCONSISTENT_CLUSTER_ID.
//   - A different incarnation while the registered one still has a live,
//     unfenced session: DUPLICATE_BROKER_REGISTRATION. Once that session is
//     fenced or expired the new incarnation replaces it.
//   - IsMigratingZkBroker: BROKER_ID_NOT_REGISTERED (no ZK migration).
//   - Every finalized feature must lie in the broker's supported range
//     (metadata.version counts as [1, 1] when not sent): UNSUPPORTED_VERSION.
//   - A new incarnation replacing an unfenced one (whose session expired)
//     first fences the old one in a batch of its own, like session expiry.
//   - A new incarnation writes a RegisterBrokerRecord at offset X, Fenced,
//     with BrokerEpoch X; the response carries X. The same incarnation again
//     amends the registration (listeners, rack, features) and keeps epoch,
//     fencing and controlled-shutdown state (KAFKA-16952).
//
// Either way the broker gets a fresh session. PreviousBrokerEpoch only
// matters with ELR (KIP-966), which metadata.version < 3.7 does not have.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/metadata/records"
)

func (c *core) brokerRegistration(req *kmsg.BrokerRegistrationRequest, nowMs int64) Result {
	resp := req.ResponseKind().(*kmsg.BrokerRegistrationResponse)
	resp.SetVersion(req.Version)
	resp.BrokerEpoch = -1
	fail := func(e *kerr.Error, msg string, fields ...zap.Field) Result {
		c.log.Info("refused broker registration: "+msg, append(fields, zap.Int32("broker", req.BrokerID))...)
		resp.ErrorCode = e.Code
		return Result{Response: resp}
	}
	img := c.pending.img
	if req.ClusterID != c.cfg.ClusterID {
		return fail(kerr.InconsistentClusterID, "wrong cluster id", zap.String("clusterID", req.ClusterID))
	}
	existing, registered := img.Broker(req.BrokerID)
	sameIncarnation := registered && existing.IncarnationID == records.UUID(req.IncarnationID)
	if registered && !sameIncarnation && c.sessions.valid(req.BrokerID, nowMs) {
		return fail(kerr.DuplicateBrokerRegistration, "another incarnation has a live session")
	}
	if req.IsMigratingZkBroker {
		return fail(kerr.BrokerIDNotRegistered, "ZooKeeper migration is not supported")
	}
	features, ok := c.registrationFeatures(req)
	if !ok {
		return fail(kerr.UnsupportedVersion, "a finalized feature level is outside the broker's range")
	}
	mv := c.metadataVersion()
	if registered && !sameIncarnation && !existing.Fenced {
		// The old incarnation's session expired, but the periodic check has
		// not fenced it yet. Fence it first, in its own batch, as that check
		// would have: otherwise the new registration (fenced) would inherit
		// the old incarnation's leaderships and ISR places. Kafka before
		// KIP-966 leaves them in place; kraftd keeps leaders on active
		// brokers.
		c.sessions.fence(req.BrokerID)
		if code := c.appendRecords(fenceBroker(img, req.BrokerID, mv, c.unclean(img)), nowMs); code != 0 {
			resp.ErrorCode = code
			return Result{Response: resp}
		}
	}
	rec := records.NewRegisterBrokerRecord()
	rec.BrokerID, rec.IncarnationID, rec.Rack = req.BrokerID, records.UUID(req.IncarnationID), req.Rack
	rec.Features = features
	for _, l := range req.Listeners {
		rec.EndPoints = append(rec.EndPoints, records.BrokerEndpoint{
			Name: l.Name, Host: l.Host, Port: l.Port, SecurityProtocol: l.SecurityProtocol})
	}
	if sameIncarnation {
		rec.BrokerEpoch, rec.Fenced, rec.InControlledShutdown = existing.Epoch, existing.Fenced, existing.InControlledShutdown
	} else {
		// The record is the first (and only) one of its batch, so it lands
		// at nextOffset: that offset is the new broker epoch.
		rec.BrokerEpoch = c.nextOffset
		c.sessions.remove(req.BrokerID)
	}
	c.sessions.register(req.BrokerID, rec.Fenced, nowMs)
	resp.BrokerEpoch = rec.BrokerEpoch
	c.log.Info("registered broker", zap.Int32("broker", req.BrokerID), zap.Int64("brokerEpoch", rec.BrokerEpoch),
		zap.Bool("amend", sameIncarnation))
	return Result{Records: []records.Record{{Version: registerBrokerVersion(mv), Message: rec}}, Response: resp}
}

// registrationFeatures checks every finalized feature against the broker's
// ranges (Kafka's processRegistrationFeature) and returns the ranges to
// record.
func (c *core) registrationFeatures(req *kmsg.BrokerRegistrationRequest) ([]records.BrokerFeature, bool) {
	img := c.pending.img
	var out []records.BrokerFeature
	seen := map[string]bool{}
	finalized := func(name string) int16 {
		if l, ok := img.Feature(name); ok {
			return l
		}
		if name == image.MetadataVersionFeature {
			return 1
		}
		return 0
	}
	check := func(f records.BrokerFeature) bool {
		l := finalized(f.Name)
		return l >= f.MinSupportedVersion && l <= f.MaxSupportedVersion
	}
	for _, f := range req.Features {
		bf := records.BrokerFeature{Name: f.Name, MinSupportedVersion: f.MinSupportedVersion, MaxSupportedVersion: f.MaxSupportedVersion}
		if !check(bf) {
			return nil, false
		}
		seen[f.Name] = true
		out = append(out, bf)
	}
	if !seen[image.MetadataVersionFeature] {
		// Brokers that send no range support only the first KRaft level.
		mv := records.BrokerFeature{Name: image.MetadataVersionFeature, MinSupportedVersion: 1, MaxSupportedVersion: 1}
		if !check(mv) {
			return nil, false
		}
		out = append(out, mv)
		seen[mv.Name] = true
	}
	for _, f := range img.Features() {
		if !seen[f.Name] && f.Level != 0 {
			return nil, false // finalized, and the broker supports only level 0
		}
	}
	return out, true
}

// registerBrokerVersion is the RegisterBrokerRecord version for mv.
func registerBrokerVersion(mv int16) int16 {
	switch {
	case mv >= mv37IV2:
		return 3
	case mv >= mv34IV0:
		return 2
	case mv >= mv33IV3:
		return 1
	}
	return 0
}
