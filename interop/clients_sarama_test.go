package interop

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// saramaAdmin drives the scenario with IBM/sarama's ClusterAdmin, the way a
// sarama user would: Config.Version says which Kafka the cluster is (4.0,
// KRaft only), and sarama picks its request versions from that. sarama's
// admin calls take no context; Admin.Timeout bounds them instead.
type saramaAdmin struct {
	client sarama.Client
	adm    sarama.ClusterAdmin
	conf   *sarama.Config
}

func saramaConfig(version sarama.KafkaVersion) *sarama.Config {
	conf := sarama.NewConfig()
	conf.Version = version
	conf.ClientID = "interop-sarama"
	conf.Admin.Timeout = 10 * time.Second
	conf.Metadata.AllowAutoTopicCreation = false
	conf.Metadata.Retry.Backoff = 50 * time.Millisecond
	return conf
}

// newSaramaAdmin is sarama configured for Kafka 4.0 (KRaft only).
func newSaramaAdmin(t *testing.T, c *cluster) admin {
	return newSaramaAdminAt(t, c, sarama.V4_0_0_0)
}

// newSaramaDefaultAdmin is sarama with its default Config.Version (2.8),
// what a sarama user gets without configuring anything.
func newSaramaDefaultAdmin(t *testing.T, c *cluster) admin {
	return newSaramaAdminAt(t, c, sarama.DefaultVersion)
}

func newSaramaMaxAdmin(t *testing.T, c *cluster) admin {
	return newSaramaAdminAt(t, c, sarama.MaxVersion)
}

func newSaramaAdminAt(t *testing.T, c *cluster, version sarama.KafkaVersion) admin {
	conf := saramaConfig(version)
	client, err := sarama.NewClient(c.bootstrap(), conf)
	if err != nil {
		t.Fatalf("sarama client: %v", err)
	}
	adm, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		client.Close()
		t.Fatalf("sarama admin: %v", err)
	}
	// Closing the admin closes the client it was built from.
	t.Cleanup(func() { adm.Close() })
	return &saramaAdmin{client: client, adm: adm, conf: conf}
}

// saramaErr turns sarama's KError (alone or inside a TopicError) into a
// kerr-wrapping error for the scenario.
func saramaErr(err error) error {
	var ke sarama.KError
	if err != nil && errors.As(err, &ke) && ke != sarama.ErrNoError {
		return kafkaError(int16(ke), err)
	}
	return err
}

func (s *saramaAdmin) brokers(context.Context) ([]int32, int32, error) {
	if err := s.client.RefreshMetadata(); err != nil {
		return nil, 0, saramaErr(err)
	}
	ctrl, err := s.client.RefreshController()
	if err != nil {
		return nil, 0, saramaErr(err)
	}
	var ids []int32
	for _, b := range s.client.Brokers() {
		ids = append(ids, b.ID())
	}
	return sortedIDs(ids), ctrl.ID(), nil
}

func (s *saramaAdmin) createTopic(_ context.Context, topic string, partitions int32, rf int16) error {
	detail := &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: rf}
	return saramaErr(s.adm.CreateTopic(topic, detail, false))
}

func (s *saramaAdmin) leaders(_ context.Context, topic string) (map[int32]int32, error) {
	mds, err := s.adm.DescribeTopics(nil) // nil: every topic
	if err != nil {
		return nil, saramaErr(err)
	}
	for _, md := range mds {
		if md.Name != topic {
			continue
		}
		if md.Err != sarama.ErrNoError {
			return nil, saramaErr(md.Err)
		}
		out := map[int32]int32{}
		for _, p := range md.Partitions {
			out[p.ID] = p.Leader
		}
		return out, nil
	}
	return nil, errTopicAbsent
}

// describeCluster uses ClusterAdmin.DescribeCluster (the DescribeCluster API
// for Version >= 2.8) for brokers and controller; that helper drops the
// cluster id, so a raw DescribeCluster request to the admin's controller
// broker supplies it.
func (s *saramaAdmin) describeCluster(context.Context) (clusterView, error) {
	bs, ctrl, err := s.adm.DescribeCluster()
	if err != nil {
		return clusterView{}, saramaErr(err)
	}
	v := clusterView{controllerID: ctrl}
	for _, b := range bs {
		v.brokers = append(v.brokers, b.ID())
	}
	v.brokers = sortedIDs(v.brokers)
	cb, err := s.adm.Controller()
	if err != nil {
		return clusterView{}, saramaErr(err)
	}
	resp, err := cb.DescribeCluster(sarama.NewDescribeClusterRequest(s.conf.Version))
	if err != nil {
		return clusterView{}, saramaErr(err)
	}
	if resp.Err != sarama.ErrNoError {
		return clusterView{}, saramaErr(resp.Err)
	}
	v.clusterID = resp.ClusterID
	return v, nil
}

func (s *saramaAdmin) createPartitions(_ context.Context, topic string, total int32) error {
	return saramaErr(s.adm.CreatePartitions(topic, total, nil, false))
}

func (s *saramaAdmin) deleteTopic(_ context.Context, topic string) error {
	return saramaErr(s.adm.DeleteTopic(topic))
}
