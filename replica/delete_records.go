package replica

import "fmt"

// DeleteRecordsHighWatermark is DeleteRecords' offset -1: up to the high
// watermark (Kafka's DeleteRecordsRequest.HIGH_WATERMARK).
const DeleteRecordsHighWatermark = -1

// DeleteRecords raises the leader's log start offset to offset (-1: the high
// watermark), as Kafka's Partition.deleteRecordsOnLeader: only the leader
// may (ErrNotLeader), only on a topic whose cleanup.policy has delete
// (ErrPolicyViolation), and only up to the high watermark
// (ErrOffsetOutOfRange for more, or a negative offset other than -1). A
// lower offset than the current start changes nothing. It returns the
// offset the caller waits for LowWatermark to reach. Whole segments below
// the new start go at the next retention pass; followers raise theirs from
// the LogStartOffset of their next fetch answers, which it wakes.
func (p *Partition) DeleteRecords(offset int64) (int64, error) {
	if !p.Config().Delete {
		return 0, fmt.Errorf("%w: records of partition %s can not be deleted due to the configured policy", ErrPolicyViolation, p.tp)
	}
	p.mu.Lock()
	if !p.isLeader() {
		p.mu.Unlock()
		return 0, fmt.Errorf("%w: %s is led by %d", ErrNotLeader, p.tp, p.state.Leader)
	}
	hw := p.hw.Load()
	if offset == DeleteRecordsHighWatermark {
		offset = hw
	}
	if offset < 0 || offset > hw {
		p.mu.Unlock()
		return 0, fmt.Errorf("%w: cannot increment the log start offset to %d of partition %s since it is larger than the high watermark %d",
			ErrOffsetOutOfRange, offset, p.tp, hw)
	}
	p.log.SetStartOffset(offset)
	p.mu.Unlock()
	p.notify()
	p.notifyAppend() // followers parked on the log end learn the new start
	return offset, nil
}

// LowWatermark is the smallest log start offset among the leader and the
// followers on eligible brokers (Kafka's Partition.lowWatermarkIfLeader,
// which counts alive brokers; here: registered, unfenced and not shutting
// down, or every follower before replication starts). A follower that has
// not fetched since this broker became leader counts as -1. DeleteRecords
// waits for it to reach its offset: every live replica has dropped the
// records.
func (p *Partition) LowWatermark() (int64, error) {
	view := p.hooks.brokers()
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.isLeader() {
		return 0, fmt.Errorf("%w: %s is led by %d", ErrNotLeader, p.tp, p.state.Leader)
	}
	low := p.log.StartOffset()
	for _, e := range p.followers.all() {
		if view != nil {
			if _, eligible, _ := view.ISRBroker(e.id); !eligible {
				continue
			}
		}
		low = min(low, e.f.startOffset)
	}
	return low, nil
}
