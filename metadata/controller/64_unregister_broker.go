package controller

// UnregisterBroker, API key 64, version 0 (KIP-631). An administrator
// decommissions a broker for good (kafka-cluster.sh unregister); it is not
// part of a broker's own shutdown.
//
// Unknown broker: BROKER_ID_NOT_REGISTERED with "Broker ID N is not
// currently registered". Otherwise the broker leaves every ISR (leaders are
// re-elected as on fencing), then an UnregisterBrokerRecord removes the
// registration, and the session is dropped.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/metadata/records"
)

func (c *core) unregisterBroker(req *kmsg.UnregisterBrokerRequest) Result {
	resp := req.ResponseKind().(*kmsg.UnregisterBrokerResponse)
	resp.SetVersion(req.Version)
	img := c.pending.img
	b, ok := img.Broker(req.BrokerID)
	if !ok {
		resp.ErrorCode = kerr.BrokerIDNotRegistered.Code
		resp.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("Broker ID %d is not currently registered", req.BrokerID))
		return Result{Response: resp}
	}
	recs := changeRecords(nil, img, req.BrokerID, -1, img.PartitionsWithISRMember(req.BrokerID), c.metadataVersion(), c.unclean(img))
	recs = append(recs, records.Record{Message: &records.UnregisterBrokerRecord{BrokerID: req.BrokerID, BrokerEpoch: b.Epoch}})
	c.sessions.remove(req.BrokerID)
	return Result{Records: recs, Response: resp, nonAtomic: true} // Kafka: ControllerResult.of
}
