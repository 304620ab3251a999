package main

// Scenario 4's second half: the propagation of one leader change to every
// broker, made as an operator makes it: ElectLeaders (API 43) with the
// PREFERRED election type (kafka-leader-election.sh, or
// kadm.Client.ElectLeaders), moving a partition's leadership back to its
// preferred replica after that broker came back. kraft: the broker
// forwards it, the controller writes one PartitionChangeRecord; zk-legacy:
// the controller writes one partition state znode and sends LeaderAndIsr
// and UpdateMetadata. Each sample touches one partition and no other.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// leaderChangeTopicPrefix names the one-partition topics whose leader the
// scenario changes, one per sample.
const leaderChangeTopicPrefix = "bench-leader-"

// leaderChange times --samples leader changes. A broker x the scenario
// adds (hosting nothing else) is the first replica of one one-partition
// topic per sample, replicas [x, a, b], so x leads them all. x is shut down
// (SIGTERM: its controlled shutdown moves every one of those leaderships
// to a or b, untimed) and started again, and once it is back in every ISR
// each sample sends one ElectLeaders (PREFERRED) for one of the partitions
// and times, from the request, until every running broker's Metadata
// names x as its leader. In zk-legacy the request goes to the controller
// broker (where Kafka's clients send it); in kraft to a broker, which
// forwards it. The topics are deleted at the end; x stays in the cluster,
// hosting nothing.
func (c *benchCluster) leaderChange(ctx context.Context, r *modeRun) error {
	x, _, err := c.addBroker()
	if err != nil {
		return err
	}
	if err := c.waitListed(ctx, x); err != nil {
		return err
	}
	others := c.othersThan(x, len(c.dc.nodes))
	if len(others) < 2 {
		return errors.New("fewer than two brokers besides the one shut down")
	}
	topics := make([]string, c.o.samples)
	for i := range topics {
		topics[i] = fmt.Sprintf("%s%d", leaderChangeTopicPrefix, i)
		replicas := []int32{int32(x.id), others[i%len(others)], others[(i+1)%len(others)]}
		if err := c.createLedTopic(ctx, topics[i], replicas); err != nil {
			return fmt.Errorf("sample %d: %w", i, err)
		}
	}
	if c.dc.legacy() {
		// A zk-legacy controller's shutdown would be a failover.
		if id, _, err := c.activeController(ctx); err == nil && id == x.id {
			return fmt.Errorf("broker %d, added for the leader change, became the controller", x.id)
		}
	}
	// Leadership moves away from x, then x comes back into every ISR.
	if err := x.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-x.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if x.err != nil {
		return fmt.Errorf("broker %d exited with %v after SIGTERM", x.id, x.err)
	}
	c.progress("broker %d shut down; starting it again", x.id)
	if err := c.restart(x); err != nil {
		return err
	}
	if err := c.waitListed(ctx, x); err != nil {
		return err
	}
	if err := c.waitLedElsewhere(ctx, topics, int32(x.id)); err != nil {
		return err
	}
	var samples []float64
	last := time.Now()
	for i, topic := range topics {
		bs := c.running(c.brokers())
		to := bs[0].addr()
		if c.dc.legacy() {
			id, _, err := c.activeController(ctx)
			if err != nil {
				return err
			}
			n := c.node(id)
			if n == nil {
				return fmt.Errorf("the controller %d is not a node of the bench", id)
			}
			to = n.addr()
		}
		led := func(p kmsg.MetadataResponseTopicPartition) bool { return p.Leader == int32(x.id) }
		d, err := c.timeUntilServed(ctx, bs, topic, led, func() error { return c.electPreferred(ctx, to, topic) })
		if err != nil {
			return fmt.Errorf("sample %d, %s back to broker %d: %w", i, topic, x.id, err)
		}
		samples = append(samples, float64(d.Microseconds())/1000)
		if time.Since(last) > 2*time.Second {
			last = time.Now()
			c.progress("%d of %d leader changes timed (last %v)", i+1, c.o.samples, d.Round(time.Millisecond))
		}
	}
	for _, topic := range topics {
		if err := c.deleteTopic(ctx, topic); err != nil {
			return err
		}
	}
	r.Samples = mergeSamples(r.Samples, "leaderchange_ms", samples)
	sorted := slices.Clone(samples)
	sort.Float64s(sorted)
	r.set("leaderchange_p50_ms", quantile(sorted, 0.50))
	r.set("leaderchange_p99_ms", quantile(sorted, 0.99))
	return c.waitWhole(ctx)
}

// waitLedElsewhere waits until every running broker serves each of topics
// with a leader other than x and a full ISR (3 replicas, x back in it).
func (c *benchCluster) waitLedElsewhere(ctx context.Context, topics []string, x int32) error {
	return poll(ctx, 5*time.Millisecond, func() (bool, error) {
		for _, n := range c.running(c.brokers()) {
			v, err := c.metadata(ctx, n.addr(), topics)
			if err != nil {
				return false, nil
			}
			for _, t := range topics {
				ps := v.topics[t]
				if len(ps) != 1 || ps[0].leader < 0 || ps[0].leader == x || ps[0].isr != 3 {
					return false, nil
				}
			}
		}
		return true, nil
	})
}

// electPreferred sends one ElectLeaders (PREFERRED) for partition 0 of
// topic to addr; anything but success for it is an error.
func (c *benchCluster) electPreferred(ctx context.Context, addr, topic string) error {
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req := kmsg.NewPtrElectLeadersRequest()
	req.SetVersion(-1)
	req.TimeoutMillis = 60000
	req.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: topic, Partitions: []int32{0}}}
	raw, err := c.cl.Request(rctx, addr, req)
	if err != nil {
		return err
	}
	resp := raw.(*kmsg.ElectLeadersResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("ElectLeaders: %w", err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return fmt.Errorf("ElectLeaders: answer %+v", resp.Topics)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode); err != nil {
		return fmt.Errorf("ElectLeaders %s-0: %w", topic, err)
	}
	return nil
}

// mergeSamples adds one scenario's raw samples to a run's.
func mergeSamples(m map[string][]float64, key string, samples []float64) map[string][]float64 {
	if m == nil {
		m = map[string][]float64{}
	}
	m[key] = samples
	return m
}

// waitListed waits until every other running broker lists n (unfenced in
// kraft, registered in zk-legacy): before then a kraft controller would
// not make n a leader.
func (c *benchCluster) waitListed(ctx context.Context, n *devNode) error {
	return poll(ctx, 5*time.Millisecond, func() (bool, error) {
		if n.exited() {
			return false, fmt.Errorf("broker %d exited: %v", n.id, n.err)
		}
		for _, w := range c.running(c.brokers()) {
			if w == n {
				continue
			}
			v, err := c.metadata(ctx, w.addr(), []string{})
			if err != nil || !slices.Contains(v.ids, int32(n.id)) {
				return false, nil
			}
		}
		return true, nil
	})
}

// deleteTopic deletes topic and waits until no running broker serves it.
func (c *benchCluster) deleteTopic(ctx context.Context, topic string) error {
	rctx, cancel := context.WithTimeout(ctx, c.o.createTimeout+30*time.Second)
	defer cancel()
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.SetVersion(-1)
	req.TimeoutMillis = int32(c.o.createTimeout.Milliseconds())
	req.TopicNames = []string{topic}
	t := kmsg.NewDeleteTopicsRequestTopic()
	t.Topic = kmsg.StringPtr(topic)
	req.Topics = []kmsg.DeleteTopicsRequestTopic{t}
	raw, err := c.cl.Request(rctx, c.running(c.brokers())[0].addr(), req)
	if err != nil {
		return err
	}
	resp := raw.(*kmsg.DeleteTopicsResponse)
	for _, rt := range resp.Topics {
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) && !errors.Is(err, kerr.RequestTimedOut) {
			return fmt.Errorf("DeleteTopics %s: %w", topic, err)
		}
	}
	return poll(ctx, 5*time.Millisecond, func() (bool, error) {
		for _, n := range c.running(c.brokers()) {
			v, err := c.metadata(ctx, n.addr(), []string{topic})
			if err != nil {
				return false, nil
			}
			if _, ok := v.topics[topic]; ok {
				return false, nil
			}
		}
		return true, nil
	})
}
