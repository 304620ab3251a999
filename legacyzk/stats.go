package legacyzk

import (
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Stats are the timings the side-by-side benchmark reads: how a failover
// splits into ZooKeeper reads and pushes, and what one partition state
// change costs. Safe for concurrent use.
type Stats struct {
	mu                sync.Mutex
	failovers         []FailoverTiming
	stateChanges      int64
	stateChangeWrites time.Duration
	pushes            map[int16]pushStat
	rejected          map[int16]int64 // error code -> pushes answered with it
}

// RejectedPushes counts pushes that brokers answered with a top-level
// error, by error code (e.g. 11 STALE_CONTROLLER_EPOCH for a zombie's).
func (s *Stats) RejectedPushes() map[int16]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int16]int64{}
	for k, v := range s.rejected {
		out[k] = v
	}
	return out
}

func (s *Stats) observeRejected(code int16) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rejected == nil {
		s.rejected = map[int16]int64{}
	}
	s.rejected[code]++
}

// FailoverTiming is one controller failover.
type FailoverTiming struct {
	ControllerEpoch int32
	// ZkReads is the number of single-znode reads (getData, getChildren,
	// exists) the failover made: about P + T + 2B + a fixed handful.
	ZkReads int
	// ZkReadTime is from winning the election to having every topic and
	// partition state in memory.
	ZkReadTime time.Duration
	// ElectionTime is the elections/initialisations of offline or new
	// partitions that followed (ZooKeeper writes).
	ElectionTime time.Duration
	// PushTime is from enqueuing the first failover request to the last
	// failover response (UpdateMetadata + LeaderAndIsr + UpdateMetadata to
	// every live broker); 0 until every push is answered.
	PushTime time.Duration
	// Pushes is the number of failover requests sent.
	Pushes     int
	Partitions int
	Brokers    int
}

type pushStat struct {
	count int64
	total time.Duration
}

// PushStat is the count and mean latency (enqueue to response) of one
// request type.
type PushStat struct {
	Count int64
	Mean  time.Duration
}

// Failovers returns every failover this node ran as controller.
func (s *Stats) Failovers() []FailoverTiming {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]FailoverTiming(nil), s.failovers...)
}

// StateChangeCost is the mean time of one fenced conditional state-znode
// write (pipelined, so it is throughput-bound, not latency-bound) and how
// many were made.
func (s *Stats) StateChangeCost() (mean time.Duration, count int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stateChanges == 0 {
		return 0, 0
	}
	return s.stateChangeWrites / time.Duration(s.stateChanges), s.stateChanges
}

// Pushes returns per api key (4, 5, 6) the answered requests.
func (s *Stats) Pushes() map[int16]PushStat {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int16]PushStat{}
	for k, p := range s.pushes {
		out[k] = PushStat{Count: p.count, Mean: p.total / time.Duration(p.count)}
	}
	return out
}

func (s *Stats) observePush(key int16, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pushes == nil {
		s.pushes = map[int16]pushStat{}
	}
	p := s.pushes[key]
	p.count++
	p.total += d
	s.pushes[key] = p
}

func (s *Stats) observeStateChanges(n int, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stateChanges += int64(n)
	s.stateChangeWrites += d
}

// addFailover records f and returns its index for a later PushTime.
func (s *Stats) addFailover(f FailoverTiming) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failovers = append(s.failovers, f)
	return len(s.failovers) - 1
}

func (s *Stats) setFailoverElectionTime(i int, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failovers[i].ElectionTime = d
}

func (s *Stats) setFailoverPushTime(i int, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failovers[i].PushTime = d
}

// pushTracker counts the answered requests of one group (a failover) and
// reports the group's duration when the last one is answered.
type pushTracker struct {
	remaining atomic.Int64
	start     time.Time
	done      func(time.Duration)
}

func (t *pushTracker) answered() {
	if t != nil && t.remaining.Add(-1) == 0 {
		t.done(time.Since(t.start))
	}
}

func joinHostPort(host string, port uint16) string {
	return net.JoinHostPort(host, strconv.Itoa(int(port)))
}
