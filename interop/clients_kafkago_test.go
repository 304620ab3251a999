package interop

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	kafka "github.com/segmentio/kafka-go"
)

// kafkaGoAdmin drives the scenario with segmentio/kafka-go's Client, which
// negotiates versions through ApiVersions and sends admin requests to the
// controller the Metadata answer names. kafka-go has no DescribeCluster
// call, so "describe cluster" is its Metadata answer (cluster id, brokers,
// controller), which is how kafka-go users get that information.
type kafkaGoAdmin struct {
	cl *kafka.Client
}

func newKafkaGoAdmin(t *testing.T, c *cluster) admin {
	// The transport answers Metadata from a cache refreshed every
	// MetadataTTL (6 s by default); polling for a new topic wants fresh
	// answers. Its idle connections close with it.
	tr := &kafka.Transport{ClientID: "interop-kafka-go", MetadataTTL: 50 * time.Millisecond}
	t.Cleanup(tr.CloseIdleConnections)
	return &kafkaGoAdmin{cl: &kafka.Client{Addr: kafka.TCP(c.bootstrap()...), Timeout: 10 * time.Second, Transport: tr}}
}

// kafkaGoErr turns a kafka.Error into a kerr-wrapping error for the scenario.
func kafkaGoErr(err error) error {
	var ke kafka.Error
	if err != nil && errors.As(err, &ke) {
		return kafkaError(int16(ke), err)
	}
	return err
}

func (k *kafkaGoAdmin) metadata(ctx context.Context) (*kafka.MetadataResponse, error) {
	return k.cl.Metadata(ctx, &kafka.MetadataRequest{}) // no topics: every topic
}

func (k *kafkaGoAdmin) brokers(ctx context.Context) ([]int32, int32, error) {
	md, err := k.metadata(ctx)
	if err != nil {
		return nil, 0, kafkaGoErr(err)
	}
	var ids []int32
	for _, b := range md.Brokers {
		ids = append(ids, int32(b.ID))
	}
	return sortedIDs(ids), int32(md.Controller.ID), nil
}

func (k *kafkaGoAdmin) createTopic(ctx context.Context, topic string, partitions int32, rf int16) error {
	resp, err := k.cl.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{
		Topic: topic, NumPartitions: int(partitions), ReplicationFactor: int(rf),
	}}})
	if err != nil {
		return kafkaGoErr(err)
	}
	return topicResult(resp.Errors, topic)
}

// topicResult is the per-topic outcome of one of kafka-go's admin calls.
func topicResult(errs map[string]error, topic string) error {
	err, ok := errs[topic]
	if !ok {
		return fmt.Errorf("topic %s missing from the response", topic)
	}
	return kafkaGoErr(err)
}

func (k *kafkaGoAdmin) leaders(ctx context.Context, topic string) (map[int32]int32, error) {
	md, err := k.metadata(ctx)
	if err != nil {
		return nil, kafkaGoErr(err)
	}
	for _, tp := range md.Topics {
		if tp.Name != topic {
			continue
		}
		if tp.Error != nil {
			return nil, kafkaGoErr(tp.Error)
		}
		out := map[int32]int32{}
		for _, p := range tp.Partitions {
			out[int32(p.ID)] = int32(p.Leader.ID)
		}
		return out, nil
	}
	return nil, errTopicAbsent
}

func (k *kafkaGoAdmin) describeCluster(ctx context.Context) (clusterView, error) {
	md, err := k.metadata(ctx)
	if err != nil {
		return clusterView{}, kafkaGoErr(err)
	}
	v := clusterView{clusterID: md.ClusterID, controllerID: int32(md.Controller.ID)}
	for _, b := range md.Brokers {
		v.brokers = append(v.brokers, int32(b.ID))
	}
	v.brokers = sortedIDs(v.brokers)
	return v, nil
}

func (k *kafkaGoAdmin) createPartitions(ctx context.Context, topic string, total int32) error {
	resp, err := k.cl.CreatePartitions(ctx, &kafka.CreatePartitionsRequest{
		Topics: []kafka.TopicPartitionsConfig{{Name: topic, Count: total}},
	})
	if err != nil {
		return kafkaGoErr(err)
	}
	return topicResult(resp.Errors, topic)
}

func (k *kafkaGoAdmin) deleteTopic(ctx context.Context, topic string) error {
	resp, err := k.cl.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{topic}})
	if err != nil {
		return kafkaGoErr(err)
	}
	return topicResult(resp.Errors, topic)
}
