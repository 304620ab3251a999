package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/replica"
)

// DescribeProducers: v0 (KIP-664), for operators finding a hanging
// transaction (one that holds the last stable offset, and with it every
// read_committed consumer).
//
// Behaviour, as Kafka's ReplicaManager.activeProducerState: the leader lists
// the producers its partition knows, each with its epoch, last sequence
// (-1 without a data batch), its last batch's timestamp, the coordinator
// epoch of its last marker and the first offset of its ongoing transaction
// (-1 for none). A partition not led here is NOT_LEADER_OR_FOLLOWER, an
// unknown one UNKNOWN_TOPIC_OR_PARTITION.
func (c *ClientAPI) handleDescribeProducers(_ context.Context, req *protocol.Request) (kmsg.Response, error) {
	body := req.Body.(*kmsg.DescribeProducersRequest)
	resp := body.ResponseKind().(*kmsg.DescribeProducersResponse)
	img := c.cfg.Metadata.Image()
	for _, rt := range body.Topics {
		st := kmsg.NewDescribeProducersResponseTopic()
		st.Topic = rt.Topic
		t, _ := img.TopicByName(rt.Topic)
		for _, partition := range rt.Partitions {
			sp := kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = partition
			p, err := c.hostedPartition(img, t, partition)
			if err == nil {
				var infos []replica.ProducerInfo
				infos, err = p.ActiveProducers()
				for _, in := range infos {
					ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
					ap.ProducerID, ap.ProducerEpoch, ap.LastSequence = in.ProducerID, int32(in.ProducerEpoch), in.LastSequence
					ap.LastTimestamp, ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = in.LastTimestampMs, in.CoordinatorEpoch, in.TxnStartOffset
					sp.ActiveProducers = append(sp.ActiveProducers, ap)
				}
			}
			if sp.ErrorCode = replicaErrorCode(err); err != nil {
				msg := err.Error()
				sp.ErrorMessage = &msg
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
