package image

import (
	"errors"
	"fmt"
	"slices"
)

// ErrInsane is wrapped by every error Check and CheckTransition return.
var ErrInsane = errors.New("image: invariant violated")

// Check verifies PartitionSanity on every partition: replicas are
// distinct; ISR, removing and adding replicas lie within the replicas;
// the leader is in the ISR or NoLeader; epochs are not negative. It costs a
// full scan and is meant for tests and invariant builds. It does not
// require leaders to be unfenced; see CheckLeaders.
func (img *Image) Check() error {
	var errs []error
	for t := range img.Topics() {
		for id, p := range t.Partitions() {
			if err := p.check(); err != nil {
				errs = append(errs, fmt.Errorf("%w: %s-%d: %w", ErrInsane, t.name, id, err))
			}
		}
	}
	return errors.Join(errs...)
}

func (p Partition) check() error {
	r := p.Replicas()
	for i, b := range r {
		if slices.Contains(r[:i], b) {
			return fmt.Errorf("replica %d repeated in %v", b, r)
		}
	}
	for _, l := range []struct {
		name string
		ids  []int32
	}{{"isr", p.ISR()}, {"removing", p.RemovingReplicas()}, {"adding", p.AddingReplicas()}} {
		for _, b := range l.ids {
			if !slices.Contains(r, b) {
				return fmt.Errorf("%s member %d not a replica in %v", l.name, b, r)
			}
		}
	}
	if p.Leader != NoLeader && !slices.Contains(p.ISR(), p.Leader) {
		return fmt.Errorf("leader %d not in isr %v", p.Leader, p.ISR())
	}
	if p.LeaderEpoch < 0 || p.PartitionEpoch < 0 {
		return fmt.Errorf("negative epoch: leaderEpoch %d partitionEpoch %d", p.LeaderEpoch, p.PartitionEpoch)
	}
	return nil
}

// CheckLeaders verifies that every leader is a registered broker that is
// not fenced. It holds for images published at batch boundaries by a
// correct controller, which writes a broker's Fenced=1 after the records
// moving its leaderships away. A broker in controlled shutdown may still
// lead: its moves are not atomic (Kafka's ControllerResult.of), they go
// out in several batches after the InControlledShutdown record, and a
// leader change may leave the rest to the next controller.
func (img *Image) CheckLeaders() error {
	var errs []error
	for t := range img.Topics() {
		for id, p := range t.Partitions() {
			if p.Leader == NoLeader {
				continue
			}
			b, ok := img.brokers.Get(p.Leader)
			if !ok || b.Fenced {
				errs = append(errs, fmt.Errorf("%w: %s-%d: leader %d is not an active broker",
					ErrInsane, t.name, id, p.Leader))
			}
		}
	}
	return errors.Join(errs...)
}

// CheckTransition verifies what must hold between consecutive images: the
// provenance offset does not go down, and for every partition of a topic
// present in both, leaderEpoch and partitionEpoch do not go down.
func CheckTransition(prev, next *Image) error {
	if next.prov.Offset < prev.prov.Offset {
		return fmt.Errorf("%w: offset went from %d to %d", ErrInsane, prev.prov.Offset, next.prov.Offset)
	}
	var errs []error
	for t := range next.Topics() {
		old, ok := prev.TopicByID(t.id)
		if !ok || old == t {
			continue // new topic, or unchanged and shared
		}
		for id, p := range t.Partitions() {
			q, ok := old.Partition(id)
			if ok && (p.LeaderEpoch < q.LeaderEpoch || p.PartitionEpoch < q.PartitionEpoch) {
				errs = append(errs, fmt.Errorf("%w: %s-%d: epochs went from %d/%d to %d/%d", ErrInsane,
					t.name, id, q.LeaderEpoch, q.PartitionEpoch, p.LeaderEpoch, p.PartitionEpoch))
			}
		}
	}
	return errors.Join(errs...)
}

// checkStructure verifies the invariants the package itself maintains (as
// opposed to PartitionSanity, which depends on the log): the two topic
// indexes agree, partition counts add up, and every partition's lists and
// directories are well formed. A failure is a bug in this package.
func (img *Image) checkStructure() error {
	if img.topics.byName.Len() != img.topics.byID.Len() {
		return fmt.Errorf("%w: %d names for %d topic ids", ErrInsane, img.topics.byName.Len(), img.topics.byID.Len())
	}
	total := 0
	for name, id := range img.topics.byName.All() {
		t, ok := img.topics.byID.Get(id)
		if !ok || t.name != name || t.id != id {
			return fmt.Errorf("%w: name index entry %q does not match topic %s", ErrInsane, name, id)
		}
		n := 0
		var err error
		t.parts.scan(func(pid int32, p *Partition) bool {
			n++
			err = p.checkLayout()
			if err != nil {
				err = fmt.Errorf("%w: %s-%d: %w", ErrInsane, name, pid, err)
			}
			return err == nil
		})
		if err != nil {
			return err
		}
		if n != t.NumPartitions() {
			return fmt.Errorf("%w: topic %s counts %d partitions, holds %d", ErrInsane, name, t.NumPartitions(), n)
		}
		total += n
	}
	if total != img.topics.numPartitions {
		return fmt.Errorf("%w: image counts %d partitions, holds %d", ErrInsane, img.topics.numPartitions, total)
	}
	if err := img.checkBrokerIndex(); err != nil {
		return err
	}
	return nil
}

func (p *Partition) checkLayout() error {
	prev := uint16(0)
	for _, e := range p.ends {
		if e < prev {
			return fmt.Errorf("list ends %v decrease", p.ends)
		}
		prev = e
	}
	if int(prev) != len(p.lists) {
		return fmt.Errorf("list ends %v for %d ids", p.ends, len(p.lists))
	}
	if p.dirs != nil && (len(p.dirs) != len(p.Replicas()) || allMigrating(p.dirs)) {
		return fmt.Errorf("directories %v for replicas %v", p.dirs, p.Replicas())
	}
	return nil
}
