package interop

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

// kcatAdmin drives the listing steps with librdkafka through Debian's kcat
// (`kcat -L -J`, JSON metadata). kcat has no admin API, so creating,
// growing and deleting topics are errUnsupported (the scenario does them
// with franz-go and kcat only looks), and so is describing the cluster:
// librdkafka's metadata call does not expose the cluster id.
type kcatAdmin struct {
	bin     string
	servers string
}

func newKcatAdmin(t *testing.T, c *cluster) admin {
	bin, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat not installed (make deps installs Debian's kcat)")
	}
	return &kcatAdmin{bin: bin, servers: strings.Join(c.bootstrap(), ",")}
}

// kcatMetadata is the part of `kcat -L -J` output the scenario reads.
type kcatMetadata struct {
	ControllerID *int32 `json:"controllerid"`
	Brokers      []struct {
		ID int32 `json:"id"`
	} `json:"brokers"`
	Topics []struct {
		Topic      string `json:"topic"`
		Error      string `json:"error"`
		Partitions []struct {
			Partition int32 `json:"partition"`
			Leader    int32 `json:"leader"`
		} `json:"partitions"`
	} `json:"topics"`
}

func (k *kcatAdmin) metadata(ctx context.Context) (*kcatMetadata, error) {
	out, err := exec.CommandContext(ctx, k.bin, "-L", "-J", "-b", k.servers, "-m", "5").Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return nil, fmt.Errorf("kcat -L: %v: %s", err, ee.Stderr)
		}
		return nil, fmt.Errorf("kcat -L: %w", err)
	}
	var md kcatMetadata
	if err := json.Unmarshal(out, &md); err != nil {
		return nil, fmt.Errorf("kcat -L -J output %q: %w", out, err)
	}
	return &md, nil
}

func (k *kcatAdmin) brokers(ctx context.Context) ([]int32, int32, error) {
	md, err := k.metadata(ctx)
	if err != nil {
		return nil, 0, err
	}
	if md.ControllerID == nil {
		return nil, 0, fmt.Errorf("kcat -L -J has no controllerid")
	}
	var ids []int32
	for _, b := range md.Brokers {
		ids = append(ids, b.ID)
	}
	return sortedIDs(ids), *md.ControllerID, nil
}

func (k *kcatAdmin) leaders(ctx context.Context, topic string) (map[int32]int32, error) {
	md, err := k.metadata(ctx)
	if err != nil {
		return nil, err
	}
	for _, tp := range md.Topics {
		if tp.Topic != topic {
			continue
		}
		if tp.Error != "" {
			return nil, fmt.Errorf("kcat: topic %s: %s", topic, tp.Error)
		}
		out := map[int32]int32{}
		for _, p := range tp.Partitions {
			out[p.Partition] = p.Leader
		}
		return out, nil
	}
	return nil, errTopicAbsent
}

func (k *kcatAdmin) describeCluster(context.Context) (clusterView, error) {
	return clusterView{}, fmt.Errorf("%w: librdkafka metadata has no cluster id", errUnsupported)
}

func (k *kcatAdmin) createTopic(context.Context, string, int32, int16) error {
	return fmt.Errorf("%w: kcat cannot create topics", errUnsupported)
}

func (k *kcatAdmin) createPartitions(context.Context, string, int32) error {
	return fmt.Errorf("%w: kcat cannot create partitions", errUnsupported)
}

func (k *kcatAdmin) deleteTopic(context.Context, string) error {
	return fmt.Errorf("%w: kcat cannot delete topics", errUnsupported)
}
