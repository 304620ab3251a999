package controller

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
)

// apiRange is one API this controller serves and its version range.
type apiRange struct{ key, min, max int16 }

// servedAPIs are the controller-listener APIs of this package, at the
// versions Kafka 3.9 (apache/kafka@1eb7644) accepts, capped by kmsg.
var servedAPIs = []apiRange{
	{19, 0, 7}, // CreateTopics
	{20, 0, 6}, // DeleteTopics
	{33, 0, 2}, // AlterConfigs
	{44, 0, 1}, // IncrementalAlterConfigs
	{37, 0, 3}, // CreatePartitions
	{56, 0, 3}, // AlterPartition
	{60, 0, 1}, // DescribeCluster
	{62, 0, 4}, // BrokerRegistration
	{63, 0, 1}, // BrokerHeartbeat
	{64, 0, 0}, // UnregisterBroker
	{67, 0, 0}, // AllocateProducerIds
	{43, 0, 2}, // ElectLeaders (last: fuzz corpus files pick an API by its index here)
}

// RegisterHandlers serves the controller APIs on reg (the CONTROLLER
// listener's registry). Each request waits for the loop's answer, which
// for writes comes only after the records commit.
func (c *Controller) RegisterHandlers(reg *protocol.Registry) {
	for _, a := range servedAPIs {
		reg.Register(a.key, a.min, a.max, c.handle)
	}
	reg.Register(57, 0, updateFeaturesMaxVersion, c.handleUpdateFeatures)
}

func (c *Controller) handle(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
	return c.submit(ctx, req.Body)
}
