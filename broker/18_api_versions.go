package broker

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
)

// ApiVersions: v0-v5, answered by the protocol package; the broker only
// decorates the answer (Kafka's DefaultApiVersionManager):
//   - forwarded APIs (CreateTopics, DeleteTopics, CreatePartitions,
//     ElectLeaders, DescribeQuorum) advertise at most the active controller's max, once a
//     controller has been contacted, so a client never picks a version the
//     controller cannot take (KIP-590);
//   - SupportedFeatures (v3+, tag 0): the metadata.version range this broker
//     registers (KIP-584);
//   - FinalizedFeatures (tag 2) from the published image, and
//     FinalizedFeaturesEpoch (tag 1) = the image's offset, -1 before any.
func (b *Broker) apiVersionsHook(req *protocol.Request, resp *kmsg.ApiVersionsResponse) {
	for _, key := range forwardedApis {
		maxV := b.ch.maxVersion(key)
		if maxV < 0 {
			continue
		}
		i := slices.IndexFunc(resp.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool { return k.ApiKey == key })
		if i < 0 {
			continue
		}
		if maxV < resp.ApiKeys[i].MinVersion {
			resp.ApiKeys = slices.Delete(resp.ApiKeys, i, i+1)
			continue
		}
		resp.ApiKeys[i].MaxVersion = min(resp.ApiKeys[i].MaxVersion, maxV)
	}
	if req.Version < 3 {
		return
	}
	sf := kmsg.NewApiVersionsResponseSupportedFeature()
	sf.Name, sf.MinVersion, sf.MaxVersion = "metadata.version", b.cfg.MinMetadataVersion, b.cfg.MaxMetadataVersion
	resp.SupportedFeatures = []kmsg.ApiVersionsResponseSupportedFeature{sf}
	img := b.Image()
	resp.FinalizedFeaturesEpoch = img.Provenance().Offset
	for _, f := range img.Features() {
		ff := kmsg.NewApiVersionsResponseFinalizedFeature()
		ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = f.Name, f.Level, f.Level
		resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
	}
}
