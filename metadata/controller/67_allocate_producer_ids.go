package controller

// AllocateProducerIds, API key 67, version 0 (KIP-730). A broker asks for
// a block of producer ids for InitProducerId. The controller hands out
// consecutive blocks of 1000 and records the next free id in a
// ProducerIdsRecord (Kafka's ProducerIdControlManager). Unknown broker or
// wrong epoch: STALE_BROKER_EPOCH (ClusterControlManager.checkBrokerEpoch);
// ids exhausted: UNKNOWN_SERVER_ERROR. Like Kafka, a fenced broker with its
// current epoch gets a block: generateNextProducerId checks nothing else.
// Tests: testdata/producer_ids.txt, TestAllocateProducerIDsExhausted.

import (
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/metadata/records"
)

// producerIDBlockSize is Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE.
const producerIDBlockSize = 1000

func (c *core) allocateProducerIDs(req *kmsg.AllocateProducerIDsRequest) Result {
	resp := req.ResponseKind().(*kmsg.AllocateProducerIDsResponse)
	resp.SetVersion(req.Version)
	img := c.pending.img
	if b, ok := img.Broker(req.BrokerID); !ok || b.Epoch != req.BrokerEpoch {
		resp.ErrorCode = kerr.StaleBrokerEpoch.Code
		return Result{Response: resp}
	}
	first := max(img.ProducerIDs().NextProducerID, 0)
	if first > math.MaxInt64-producerIDBlockSize {
		resp.ErrorCode = kerr.UnknownServerError.Code
		return Result{Response: resp}
	}
	resp.ProducerIDStart, resp.ProducerIDLen = first, producerIDBlockSize
	rec := &records.ProducerIdsRecord{BrokerID: req.BrokerID, BrokerEpoch: req.BrokerEpoch, NextProducerID: first + producerIDBlockSize}
	return Result{Records: []records.Record{{Message: rec}}, Response: resp}
}
