// Package probe is the data plane's steady-producer gap probe: an idempotent
// acks=-1 franz-go producer writing at a fixed rate, which records when every
// record was sent and acknowledged, and a verifier that reads the topic back
// (read_committed) and checks that nothing acknowledged was lost, duplicated
// or reordered.
//
// What it measures is what a user's producer feels during a failover: the
// longest time in which no write was acknowledged. `kraftd bench gap` runs it
// against any cluster; the fault-matrix process tests and the side-by-side
// bench (issue 17) run it around a fault.
//
// Records carry their identity in the value, "kraftd-probe <run> <seq> ",
// padded to Config.ValueBytes, so several runs can share a topic and the
// verifier tells its own records from others.
//
// Goroutines: Start starts one producing goroutine, owned by the Probe and
// ended by Stop, which then waits for every record's outcome (flushing, and
// past its deadline closing the client, which fails what is still buffered).
// franz-go's client runs its own goroutines until Close.
package probe

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"
	"go.uber.org/zap"
)

// Produce v10 (Kafka 3.7, KIP-951) added the new leader's endpoint to
// NOT_LEADER_OR_FOLLOWER answers; v9 is the newest without it, which is what
// Kafka 3.3's brokers served.
const lastProduceWithoutLeaderHints = 9

// Config of a probe run; zero values take the defaults noted.
type Config struct {
	Bootstrap []string
	Topic     string
	// Rate is records per second (default 1000).
	Rate int
	// ValueBytes is each record's value size (default 100; at least the
	// identity header).
	ValueBytes int
	// NoLeaderHints caps Produce at v9 so KIP-951 leader hints are off, as
	// against Kafka 3.3.
	NoLeaderHints bool
	// MaxBuffered caps the records waiting in the client (default 10000);
	// past it a record is refused at once (counted as failed, never sent), so
	// the pace stays steady while the cluster cannot take writes.
	MaxBuffered int
	Logger      *zap.Logger
}

func (c *Config) setDefaults() {
	if c.Rate <= 0 {
		c.Rate = 1000
	}
	if c.ValueBytes <= 0 {
		c.ValueBytes = 100
	}
	if c.MaxBuffered <= 0 {
		c.MaxBuffered = 10000
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
}

// outcome of one record; times are since the probe's start.
type outcome struct {
	sent, acked time.Duration // acked is 0 until acknowledged
	done        bool          // the promise ran (acknowledged or failed)
	partition   int32
	offset      int64
	err         error
}

// Probe is one running steady producer.
type Probe struct {
	cfg   Config
	run   string // identity of this run in record values
	cl    *kgo.Client
	start time.Time

	mu       sync.Mutex
	outcomes []outcome // by sequence number
	pending  sync.WaitGroup

	stop    chan struct{}
	stopped chan struct{}
	stopAt  time.Duration
}

// Start connects and starts producing to cfg.Topic, which must exist.
func Start(cfg Config) (*Probe, error) {
	cfg.setDefaults()
	if len(cfg.Bootstrap) == 0 || cfg.Topic == "" {
		return nil, errors.New("probe: bootstrap and topic are required")
	}
	run := fmt.Sprintf("%x", time.Now().UnixNano()&0xffffffffff)
	if min := len(header(run, 0)) + 12; cfg.ValueBytes < min {
		cfg.ValueBytes = min
	}
	// franz-go's defaults are the probe's subject: idempotent, acks=-1,
	// retries until delivered. A short linger keeps batches small at a
	// steady pace; metadata is refreshed quickly after a leader moves.
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Bootstrap...), kgo.DefaultProduceTopic(cfg.Topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(2 * time.Millisecond),
		kgo.MaxBufferedRecords(cfg.MaxBuffered), kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.ClientID("kraftd-probe"),
	}
	if cfg.NoLeaderHints {
		vs := kversion.Stable()
		vs.SetMaxKeyVersion(0, lastProduceWithoutLeaderHints)
		opts = append(opts, kgo.MaxVersions(vs))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	p := &Probe{cfg: cfg, run: run, cl: cl, start: time.Now(), stop: make(chan struct{}), stopped: make(chan struct{})}
	go p.produce()
	return p, nil
}

func header(run string, seq int) string { return fmt.Sprintf("kraftd-probe %s %d ", run, seq) }

// maxLate is how far behind its schedule the producing loop may fall (a
// ticker firing late, a short pause) and still send the records it owes.
// Past it the missed slots are skipped, so the offered load stays the rate.
const maxLate = 100 * time.Millisecond

// produce sends records at cfg.Rate until stop closes, paced by the clock.
func (p *Probe) produce() {
	defer close(p.stopped)
	interval := time.Second / time.Duration(p.cfg.Rate)
	tick := max(interval, time.Millisecond)
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	pad := make([]byte, p.cfg.ValueBytes)
	for i := range pad {
		pad[i] = 'x'
	}
	next := time.Duration(0)
	for {
		now := time.Since(p.start)
		if now-next > maxLate {
			next = now // descheduled for long: skip the missed slots
		}
		for ; next <= now; next += interval {
			p.send(pad)
		}
		select {
		case <-p.stop:
			return
		case <-ticker.C:
		}
	}
}

func (p *Probe) send(pad []byte) {
	p.mu.Lock()
	seq := len(p.outcomes)
	p.outcomes = append(p.outcomes, outcome{sent: time.Since(p.start)})
	p.mu.Unlock()
	value := append([]byte(header(p.run, seq)), pad...)[:p.cfg.ValueBytes]
	p.pending.Add(1)
	p.cl.TryProduce(context.Background(), &kgo.Record{Value: value}, func(r *kgo.Record, err error) {
		defer p.pending.Done()
		at := time.Since(p.start)
		p.mu.Lock()
		defer p.mu.Unlock()
		o := &p.outcomes[seq]
		o.done, o.err = true, err
		if err == nil {
			o.acked, o.partition, o.offset = at, r.Partition, r.Offset
		}
	})
}

// Acked is how many records have been acknowledged so far.
func (p *Probe) Acked() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, o := range p.outcomes {
		if o.done && o.err == nil {
			n++
		}
	}
	return n
}

// Settled reports whether at least one record has been acknowledged, every
// record sent more than d ago has an outcome, and no record failed after the
// last acknowledged one was sent: the producer is in its steady state (a
// fresh topic's first acks=-1 writes can wait up to a follower's fetch
// backoff, as a follower that fetched before its leader hosted the partition
// backs off). A failure followed by acknowledgements no longer counts: it
// would otherwise keep the probe unsettled for good (issue 17). Start a
// measurement window after it holds.
func (p *Probe) Settled(d time.Duration) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	cutoff := time.Since(p.start) - d
	lastAcked, lastFailed := time.Duration(-1), time.Duration(-1)
	for _, o := range p.outcomes {
		switch {
		case o.done && o.err == nil:
			lastAcked = max(lastAcked, o.sent)
		case o.done:
			lastFailed = max(lastFailed, o.sent)
		case o.sent < cutoff:
			return false
		}
	}
	return lastAcked >= 0 && lastFailed < lastAcked
}

// Since is the time since the probe started, the clock of Result's times.
func (p *Probe) Since() time.Duration { return time.Since(p.start) }

// Stop ends producing and waits for every record's outcome: it flushes until
// ctx ends, then closes the client, which fails whatever is still buffered
// or in flight (those records are unacknowledged: the verifier allows them
// at most once).
func (p *Probe) Stop(ctx context.Context) Result {
	close(p.stop)
	<-p.stopped
	p.mu.Lock()
	p.stopAt = time.Since(p.start)
	p.mu.Unlock()
	if err := p.cl.Flush(ctx); err != nil {
		p.cfg.Logger.Warn("probe: flush did not finish; closing the client fails the rest", zap.Error(err))
	}
	p.cl.Close()
	p.pending.Wait()
	return p.Result(0, p.stopAt)
}

// Result summarizes the run within the window [from, to] (times since the
// start; Stop's result uses the whole run up to the stop).
type Result struct {
	Sent, Acked, Failed int
	// LongestGap is the longest time without an acknowledgement in the
	// window, counted from the first acknowledgement (or from the window's
	// start if later) to the last one or the window's end; GapStart is when
	// it began.
	LongestGap, GapStart time.Duration
	// P50, P99 and Max are the send-to-acknowledgement latencies of the
	// records sent in the window; Max is the longest any acknowledged record
	// waited (a partition without a leader shows here even while the
	// others keep the gap short).
	P50, P99, Max time.Duration
	Window        time.Duration
	FirstErr      error
	ValueSize     int
	Rate          int
}

func (r Result) String() string {
	s := fmt.Sprintf("%d/s of %d B for %.1fs: %d sent, %d acked, %d failed; longest gap %v (from %.1fs); latency p50 %v p99 %v max %v",
		r.Rate, r.ValueSize, r.Window.Seconds(), r.Sent, r.Acked, r.Failed,
		r.LongestGap.Round(time.Millisecond), r.GapStart.Seconds(), r.P50.Round(10*time.Microsecond), r.P99.Round(10*time.Microsecond), r.Max.Round(time.Millisecond))
	if r.FirstErr != nil {
		s += fmt.Sprintf("; first error: %v", r.FirstErr)
	}
	return s
}

// Result computes the summary of the records sent within [from, to].
func (p *Probe) Result(from, to time.Duration) Result {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := Result{Window: to - from, ValueSize: p.cfg.ValueBytes, Rate: p.cfg.Rate}
	var acks, lat []time.Duration
	for _, o := range p.outcomes {
		if o.done && o.err == nil && o.acked >= from && o.acked <= to {
			acks = append(acks, o.acked)
		}
		if o.sent < from || o.sent > to {
			continue
		}
		r.Sent++
		switch {
		case o.done && o.err == nil:
			r.Acked++
			lat = append(lat, o.acked-o.sent)
		case o.done:
			r.Failed++
			if r.FirstErr == nil {
				r.FirstErr = o.err
			}
		}
	}
	r.LongestGap, r.GapStart = longestGap(acks, to)
	if len(lat) > 0 {
		slices.Sort(lat)
		r.P50, r.P99, r.Max = lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1]
	}
	return r
}

// longestGap is the longest interval between consecutive acknowledgement
// times, and from the last one to end (a producer stuck at the end of the
// window has been without acknowledgements since its last one). Before the
// first acknowledgement nothing counts: that is connection setup.
func longestGap(acks []time.Duration, end time.Duration) (gap, at time.Duration) {
	if len(acks) == 0 {
		return 0, 0
	}
	slices.Sort(acks)
	for i := 1; i < len(acks); i++ {
		if d := acks[i] - acks[i-1]; d > gap {
			gap, at = d, acks[i-1]
		}
	}
	if d := end - acks[len(acks)-1]; d > gap {
		gap, at = d, acks[len(acks)-1]
	}
	return gap, at
}
