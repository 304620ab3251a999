package image

import (
	"fmt"
	"slices"

	"github.com/kraftd/kraftd/metadata/records"
)

// Special log-directory ids (Kafka's DirectoryId). Real directory ids are
// random UUIDs; these low values are reserved.
var (
	// DirUnassigned means the replica has not been placed on a directory yet.
	DirUnassigned = records.UUID{}
	// DirLost means the replica's directory is offline.
	DirLost = records.UUID{15: 1}
	// DirMigrating means the broker has not reported directories yet
	// (metadata written before KIP-858, MV < 3.7-IV2).
	DirMigrating = records.UUID{15: 2}
)

// Leader values with special meaning.
const (
	// NoLeader is the leader of a partition without one.
	NoLeader int32 = -1
)

// Leader recovery states (KIP-704).
const (
	LeaderRecovered  int8 = 0
	LeaderRecovering int8 = 1
)

// list indexes into Partition.lists; see Partition.
const (
	listReplicas = iota
	listISR
	listRemoving
	listAdding
	listELR
	listLastKnownELR
	numLists
)

// maxListLen bounds each replica list so its end fits a uint16; a real
// cluster never has more replicas than brokers, far below this.
const maxListLen = 1<<16 - 1

// Partition is the state of one partition in an image. It is a value: the
// copy a reader gets is its own, but the slices its methods return alias the
// image and must not be modified.
//
// The six replica lists live in one []int32 with their end indexes beside
// it, so a partition with replication factor 3 costs one small allocation
// instead of six slice headers; that keeps a 1M-partition image near 120
// bytes per partition (see BenchmarkImageMemory).
//
// INVARIANTS (structural, enforced when a record is applied):
//   - ends is non-decreasing and ends[numLists-1] == len(lists);
//   - dirs is nil or len(dirs) == len(Replicas());
//   - dirs == nil iff every replica's directory is DirMigrating.
//
// PartitionSanity (leader in ISR, ISR within replicas, ...) is checked by
// Image.Check, not enforced, because the log may legitimately carry it.
type Partition struct {
	lists []int32
	dirs  []records.UUID
	ends  [numLists]uint16

	// Leader is the leader's broker id, or NoLeader (-1).
	Leader int32
	// LeaderEpoch grows by one on every leader election (and every
	// PartitionChangeRecord whose Leader is not -2).
	LeaderEpoch int32
	// PartitionEpoch grows by one on every PartitionChangeRecord.
	PartitionEpoch int32
	// LeaderRecoveryState is LeaderRecovered or LeaderRecovering (KIP-704).
	LeaderRecoveryState int8
}

func (p *Partition) list(i int) []int32 {
	start := 0
	if i > 0 {
		start = int(p.ends[i-1])
	}
	end := int(p.ends[i])
	return p.lists[start:end:end]
}

// Replicas is the replica assignment, preferred leader first.
func (p Partition) Replicas() []int32 { return p.list(listReplicas) }

// ISR is the in-sync replica set.
func (p Partition) ISR() []int32 { return p.list(listISR) }

// RemovingReplicas are replicas leaving during a reassignment.
func (p Partition) RemovingReplicas() []int32 { return p.list(listRemoving) }

// AddingReplicas are replicas joining during a reassignment.
func (p Partition) AddingReplicas() []int32 { return p.list(listAdding) }

// ELR is the eligible leader replica set (KIP-966).
func (p Partition) ELR() []int32 { return p.list(listELR) }

// LastKnownELR is the last known ELR (KIP-966).
func (p Partition) LastKnownELR() []int32 { return p.list(listLastKnownELR) }

// Directories returns one log directory per replica, in Replicas order.
// Partitions written before KIP-858 return DirMigrating for every replica
// (a fresh slice, since it is not stored).
func (p Partition) Directories() []records.UUID {
	if p.dirs != nil {
		return p.dirs[:len(p.dirs):len(p.dirs)]
	}
	out := make([]records.UUID, len(p.Replicas()))
	for i := range out {
		out[i] = DirMigrating
	}
	return out
}

// InISR reports whether broker is in the ISR.
func (p Partition) InISR(broker int32) bool { return slices.Contains(p.ISR(), broker) }

// HasReplica reports whether broker is a replica.
func (p Partition) HasReplica(broker int32) bool { return slices.Contains(p.Replicas(), broker) }

// PreferredLeader is the first replica, or NoLeader when there are none.
func (p Partition) PreferredLeader() int32 {
	if r := p.Replicas(); len(r) > 0 {
		return r[0]
	}
	return NoLeader
}

// Equal reports whether p and q hold the same state.
func (p Partition) Equal(q Partition) bool {
	return p.ends == q.ends && slices.Equal(p.lists, q.lists) && slices.Equal(p.dirs, q.dirs) &&
		p.Leader == q.Leader && p.LeaderEpoch == q.LeaderEpoch &&
		p.PartitionEpoch == q.PartitionEpoch && p.LeaderRecoveryState == q.LeaderRecoveryState
}

// boxedLists is how many list entries a partitionBox holds: the replicas
// and ISR of replication factor 3.
const boxedLists = 6

// partitionBox is a Partition allocated together with room for its lists:
// a partition that a record creates or changes costs one allocation, not
// two (a million of them in a controlled shutdown at 1M partitions). Its
// lists point into buf when they fit; it is immutable once stored.
type partitionBox struct {
	p   Partition
	buf [boxedLists]int32
}

// setLists packs the six lists into one allocation, buf's when they fit
// in it (buf may be nil).
func (p *Partition) setLists(ls [numLists][]int32, buf []int32) error {
	total := 0
	for i, l := range ls {
		if len(l) > maxListLen {
			return fmt.Errorf("%w: replica list of %d entries", ErrInvalidRecord, len(l))
		}
		total += len(l)
		if total > maxListLen {
			return fmt.Errorf("%w: replica lists of %d entries", ErrInvalidRecord, total)
		}
		p.ends[i] = uint16(total)
	}
	if total <= cap(buf) {
		p.lists = buf[:0:total]
	} else {
		p.lists = make([]int32, 0, total)
	}
	for _, l := range ls {
		p.lists = append(p.lists, l...)
	}
	return nil
}

// setDirs stores dirs, normalising "all DirMigrating" and "none given" to
// nil so that records written before and after KIP-858 compare equal, as
// Kafka's PartitionRegistration.defaultToMigrating makes them.
func (p *Partition) setDirs(dirs []records.UUID) error {
	n := len(p.Replicas())
	if len(dirs) == 0 || allMigrating(dirs) {
		p.dirs = nil
		if len(dirs) != 0 && len(dirs) != n {
			return fmt.Errorf("%w: %d directories for %d replicas", ErrInvalidRecord, len(dirs), n)
		}
		return nil
	}
	if len(dirs) != n {
		return fmt.Errorf("%w: %d directories for %d replicas", ErrInvalidRecord, len(dirs), n)
	}
	p.dirs = slices.Clone(dirs)
	return nil
}

func allMigrating(dirs []records.UUID) bool {
	for _, d := range dirs {
		if d != DirMigrating {
			return false
		}
	}
	return true
}

// partitionFromRecord builds the partition a PartitionRecord describes.
func partitionFromRecord(r *records.PartitionRecord) (*Partition, error) {
	if err := checkRecoveryState(r.LeaderRecoveryState); err != nil {
		return nil, err
	}
	box := new(partitionBox)
	p := &box.p
	p.Leader, p.LeaderEpoch, p.PartitionEpoch = r.Leader, r.LeaderEpoch, r.PartitionEpoch
	p.LeaderRecoveryState = r.LeaderRecoveryState
	err := p.setLists([numLists][]int32{r.Replicas, r.ISR, r.RemovingReplicas,
		r.AddingReplicas, r.EligibleLeaderReplicas, r.LastKnownELR}, box.buf[:])
	if err != nil {
		return nil, err
	}
	if err := p.setDirs(r.Directories); err != nil {
		return nil, err
	}
	return p, nil
}

func checkRecoveryState(s int8) error {
	if s != LeaderRecovered && s != LeaderRecovering {
		return fmt.Errorf("%w: leader recovery state %d", ErrInvalidRecord, s)
	}
	return nil
}

// merge returns p changed by r, following Kafka's PartitionRegistration.merge:
// nil lists keep their value, Leader -2 keeps leader and leaderEpoch, any
// other Leader (even the same broker) bumps leaderEpoch, and partitionEpoch
// always grows by one.
func (p Partition) merge(r *records.PartitionChangeRecord) (*Partition, error) {
	box := &partitionBox{p: p}
	next := &box.p
	lists := [numLists][]int32{p.Replicas(), p.ISR(), p.RemovingReplicas(),
		p.AddingReplicas(), p.ELR(), p.LastKnownELR()}
	changed := false
	for i, l := range [numLists][]int32{r.Replicas, r.ISR, r.RemovingReplicas,
		r.AddingReplicas, r.EligibleLeaderReplicas, r.LastKnownELR} {
		if l != nil {
			lists[i], changed = l, true
		}
	}
	// Unchanged lists stay shared with p: both are immutable.
	if changed {
		if err := next.setLists(lists, box.buf[:]); err != nil {
			return nil, err
		}
	}
	if err := next.mergeDirs(p, r); err != nil {
		return nil, err
	}
	if r.Leader != records.NoLeaderChange {
		next.Leader = r.Leader
		next.LeaderEpoch = p.LeaderEpoch + 1
	}
	if r.LeaderRecoveryState != records.NoLeaderRecoveryStateChange {
		if err := checkRecoveryState(r.LeaderRecoveryState); err != nil {
			return nil, err
		}
		next.LeaderRecoveryState = r.LeaderRecoveryState
	}
	next.PartitionEpoch = p.PartitionEpoch + 1
	return next, nil
}

// mergeDirs sets next.dirs after a change: explicit directories win; a new
// replica list keeps each surviving replica's directory and gives new ones
// DirUnassigned (Kafka's DirectoryId.createDirectoriesFrom); otherwise the
// directories are unchanged.
func (next *Partition) mergeDirs(prev Partition, r *records.PartitionChangeRecord) error {
	switch {
	case len(r.Directories) > 0:
		return next.setDirs(r.Directories)
	case r.Replicas == nil:
		next.dirs = prev.dirs
		return nil
	}
	old, oldDirs := prev.Replicas(), prev.Directories()
	dirs := make([]records.UUID, len(r.Replicas))
	for i, b := range r.Replicas {
		dirs[i] = DirUnassigned
		if j := slices.Index(old, b); j >= 0 {
			dirs[i] = oldDirs[j]
		}
	}
	return next.setDirs(dirs)
}

// toRecord fills r with the PartitionRecord that recreates p, at the lowest
// version able to carry its fields (but at least minVersion). Its lists alias p.
func (p Partition) toRecord(r *records.PartitionRecord, topicID records.UUID, id int32, minVersion int16) records.Record {
	*r = records.PartitionRecord{
		PartitionID:         id,
		TopicID:             topicID,
		Replicas:            p.Replicas(),
		ISR:                 p.ISR(),
		RemovingReplicas:    p.RemovingReplicas(),
		AddingReplicas:      p.AddingReplicas(),
		Leader:              p.Leader,
		LeaderRecoveryState: p.LeaderRecoveryState,
		LeaderEpoch:         p.LeaderEpoch,
		PartitionEpoch:      p.PartitionEpoch,
	}
	version := minVersion
	if p.dirs != nil {
		r.Directories = p.dirs
		version = max(version, 1)
	}
	if elr, lke := p.ELR(), p.LastKnownELR(); len(elr) > 0 || len(lke) > 0 {
		if len(elr) > 0 {
			r.EligibleLeaderReplicas = elr
		}
		if len(lke) > 0 {
			r.LastKnownELR = lke
		}
		version = 2
	}
	return records.Record{Version: version, Message: r}
}
