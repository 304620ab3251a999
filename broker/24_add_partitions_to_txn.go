package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/coordinator/txn"
	"github.com/kraftd/kraftd/protocol"
)

// AddPartitionsToTxn: v0-v4 (v0-v3 from producers; v4 batches
// transactions and carries VerifyOnly, which partition leaders send to
// verify a transactional batch, KIP-890).
//
// Behaviour, as Kafka's KafkaApis.handleAddPartitionsToTxnRequest and
// TransactionCoordinator.handleAddPartitionsToTransaction: a partition the
// metadata does not know is UNKNOWN_TOPIC_OR_PARTITION and the others of
// the request OPERATION_NOT_ATTEMPTED; otherwise every partition gets the
// coordinator's answer (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
// INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, CONCURRENT_TRANSACTIONS, or
// none once the transaction, Ongoing, holds them).
func (c *ClientAPI) handleAddPartitionsToTxn(ctx context.Context, req *protocol.Request) (kmsg.Response, error) {
	body := req.Body.(*kmsg.AddPartitionsToTxnRequest)
	resp := body.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if body.Version >= 4 {
		for _, t := range body.Transactions {
			resp.Transactions = append(resp.Transactions, c.addPartitionsV4(ctx, t))
		}
		return resp, nil
	}
	img := c.cfg.Metadata.Image()
	var parts []txn.TopicPartition
	unknown := map[txn.TopicPartition]bool{}
	for _, rt := range body.Topics {
		t, _ := img.TopicByName(rt.Topic)
		for _, p := range rt.Partitions {
			tp := txn.TopicPartition{Topic: rt.Topic, Partition: p}
			parts = append(parts, tp)
			if t == nil || rt.Topic == txn.Topic {
				unknown[tp] = true
				continue
			}
			if _, ok := t.Partition(p); !ok {
				unknown[tp] = true
			}
		}
	}
	code := int16(0)
	if len(unknown) == 0 {
		if err := c.txns.AddPartitions(ctx, body.TransactionalID, body.ProducerID, body.ProducerEpoch, parts); err != nil {
			code = txnErrorCode(err, body.Version)
		}
	}
	for _, rt := range body.Topics {
		st := kmsg.NewAddPartitionsToTxnResponseTopic()
		st.Topic = rt.Topic
		for _, p := range rt.Partitions {
			sp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p, code
			if len(unknown) > 0 {
				sp.ErrorCode = kerr.OperationNotAttempted.Code
				if unknown[txn.TopicPartition{Topic: rt.Topic, Partition: p}] {
					sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// txnErrorCode is a coordinator error as the request version may carry it:
// PRODUCER_FENCED is INVALID_PRODUCER_EPOCH for the versions before
// KIP-588's (AddPartitionsToTxn and EndTxn below v2, InitProducerId below
// v3), as Kafka answers older clients.
func txnErrorCode(err *kerr.Error, version int16) int16 {
	if err == kerr.ProducerFenced && version < 2 {
		return kerr.InvalidProducerEpoch.Code
	}
	return err.Code
}

// addPartitionsV4 answers one transaction of a v4 request: VerifyOnly asks
// the coordinator whether the partitions are in the transaction
// (INVALID_TXN_STATE for those that are not); otherwise they are added, as
// v0-v3 add them.
func (c *ClientAPI) addPartitionsV4(ctx context.Context, t kmsg.AddPartitionsToTxnRequestTransaction) kmsg.AddPartitionsToTxnResponseTransaction {
	var parts []txn.TopicPartition
	for _, rt := range t.Topics {
		for _, p := range rt.Partitions {
			parts = append(parts, txn.TopicPartition{Topic: rt.Topic, Partition: p})
		}
	}
	var all *kerr.Error
	var each map[txn.TopicPartition]*kerr.Error
	if t.VerifyOnly {
		each, all = c.txns.Verify(t.TransactionalID, t.ProducerID, t.ProducerEpoch, parts)
	} else {
		all = c.txns.AddPartitions(ctx, t.TransactionalID, t.ProducerID, t.ProducerEpoch, parts)
	}
	rt := kmsg.NewAddPartitionsToTxnResponseTransaction()
	rt.TransactionalID = t.TransactionalID
	for _, tt := range t.Topics {
		st := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
		st.Topic = tt.Topic
		for _, p := range tt.Partitions {
			sp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
			sp.Partition = p
			switch e := each[txn.TopicPartition{Topic: tt.Topic, Partition: p}]; {
			case all != nil:
				sp.ErrorCode = all.Code
			case e != nil:
				sp.ErrorCode = e.Code
			}
			st.Partitions = append(st.Partitions, sp)
		}
		rt.Topics = append(rt.Topics, st)
	}
	return rt
}
