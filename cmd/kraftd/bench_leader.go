package main

// Scenario 4's second half: the propagation of one leader change to every
// broker. kraftd serves neither ElectLeaders (API 43) nor
// AlterPartitionReassignments (45) in either mode, so a client cannot move
// one partition's leader on its own; the one request both modes serve that
// moves exactly one leader is a controlled shutdown of a broker leading
// exactly one partition (kraft: its BrokerHeartbeat with WantShutDown, the
// controller writing one PartitionChangeRecord with its registration
// change; zk-legacy: its ControlledShutdown, the controller writing one
// partition state znode and sending LeaderAndIsr and UpdateMetadata). The
// scenario adds a broker of its own that hosts nothing else, so that its
// shutdown changes the leader of one partition and no other partition's
// ISR.

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

// leaderChange times --samples leader changes: each sample creates a
// one-partition topic with replicas [x, a, b], x a broker the scenario
// added that hosts only that partition, so x leads it; then SIGTERM to x
// and, from the signal, until every other running broker's Metadata names
// a leader other than x (a or b). x is then started again and the topic
// deleted before the next sample, so each shutdown moves one leader and
// touches no other partition. x stays in the cluster afterwards, hosting
// nothing.
func (c *benchCluster) leaderChange(ctx context.Context, r *modeRun) error {
	x, _, err := c.addBroker()
	if err != nil {
		return err
	}
	var samples []float64
	prev := ""
	last := time.Now()
	for i := range c.o.samples {
		if err := c.waitListed(ctx, x); err != nil {
			return err
		}
		if prev != "" {
			if err := c.deleteTopic(ctx, prev); err != nil {
				return err
			}
		}
		others := c.othersThan(x, len(c.dc.nodes))
		if len(others) < 2 {
			return errors.New("fewer than two brokers besides the one shut down")
		}
		topic := fmt.Sprintf("%s%d", leaderChangeTopicPrefix, i)
		replicas := []int32{int32(x.id), others[i%len(others)], others[(i+1)%len(others)]}
		if err := c.createLedTopic(ctx, topic, replicas); err != nil {
			return fmt.Errorf("sample %d: %w", i, err)
		}
		if c.dc.legacy() {
			// A zk-legacy controller's shutdown would be a failover.
			if id, _, err := c.activeController(ctx); err == nil && id == x.id {
				return fmt.Errorf("broker %d, added for the leader change, became the controller", x.id)
			}
		}
		var witnesses []*devNode
		for _, n := range c.running(c.brokers()) {
			if n != x {
				witnesses = append(witnesses, n)
			}
		}
		moved := func(p kmsg.MetadataResponseTopicPartition) bool { return p.Leader >= 0 && p.Leader != int32(x.id) }
		d, err := c.timeUntilServed(ctx, witnesses, topic, moved, func() error { return x.cmd.Process.Signal(syscall.SIGTERM) })
		if err != nil {
			return fmt.Errorf("sample %d, the leader of %s after SIGTERM to broker %d: %w", i, topic, x.id, err)
		}
		samples = append(samples, float64(d.Microseconds())/1000)
		select {
		case <-x.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if x.err != nil {
			return fmt.Errorf("broker %d exited with %v after SIGTERM", x.id, x.err)
		}
		if time.Since(last) > 2*time.Second {
			last = time.Now()
			c.progress("%d of %d leader changes timed (last %v)", i+1, c.o.samples, d.Round(time.Millisecond))
		}
		prev = topic
		if err := c.restart(x); err != nil {
			return err
		}
	}
	if err := c.waitListed(ctx, x); err != nil {
		return err
	}
	if prev != "" {
		if err := c.deleteTopic(ctx, prev); err != nil {
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
