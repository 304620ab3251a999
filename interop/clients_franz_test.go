package interop

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// franzAdmin drives the scenario with franz-go: kadm for the admin calls
// and a raw kmsg DescribeCluster request (kadm has no helper for it) sent
// through the same kgo client, as users do.
type franzAdmin struct {
	cl  *kgo.Client
	adm *kadm.Client
}

func newFranzAdmin(t *testing.T, c *cluster) admin {
	// kgo answers a Metadata request from its cache when the last one is
	// younger than MetadataMinAge (5 s by default); polling for a new topic
	// wants fresh answers.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...), kgo.RequestTimeoutOverhead(5*time.Second),
		kgo.MetadataMinAge(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &franzAdmin{cl: cl, adm: kadm.NewClient(cl)}
}

func (f *franzAdmin) brokers(ctx context.Context) ([]int32, int32, error) {
	m, err := f.adm.BrokerMetadata(ctx)
	if err != nil {
		return nil, 0, err
	}
	return sortedIDs(m.Brokers.NodeIDs()), m.Controller, nil
}

func (f *franzAdmin) createTopic(ctx context.Context, topic string, partitions int32, rf int16) error {
	_, err := f.adm.CreateTopic(ctx, partitions, rf, nil, topic)
	return err
}

func (f *franzAdmin) leaders(ctx context.Context, topic string) (map[int32]int32, error) {
	tds, err := f.adm.ListTopics(ctx)
	if err != nil {
		return nil, err
	}
	td, ok := tds[topic]
	if !ok {
		return nil, errTopicAbsent
	}
	if td.Err != nil {
		return nil, td.Err
	}
	out := map[int32]int32{}
	for p, pd := range td.Partitions {
		out[p] = pd.Leader
	}
	return out, nil
}

func (f *franzAdmin) describeCluster(ctx context.Context) (clusterView, error) {
	req := kmsg.NewPtrDescribeClusterRequest()
	resp, err := req.RequestWith(ctx, f.cl)
	if err != nil {
		return clusterView{}, err
	}
	if err := kafkaError(resp.ErrorCode, fmt.Errorf("DescribeCluster: %v", resp.ErrorMessage)); err != nil {
		return clusterView{}, err
	}
	v := clusterView{clusterID: resp.ClusterID, controllerID: resp.ControllerID}
	for _, b := range resp.Brokers {
		v.brokers = append(v.brokers, b.NodeID)
	}
	v.brokers = sortedIDs(v.brokers)
	return v, nil
}

func (f *franzAdmin) createPartitions(ctx context.Context, topic string, total int32) error {
	rs, err := f.adm.UpdatePartitions(ctx, int(total), topic)
	if err != nil {
		return err
	}
	r, err := rs.On(topic, nil)
	if err != nil {
		return err
	}
	return r.Err
}

func (f *franzAdmin) deleteTopic(ctx context.Context, topic string) error {
	_, err := f.adm.DeleteTopic(ctx, topic)
	return err
}

func sortedIDs(ids []int32) []int32 {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}
