package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kraftd/kraftd/cmd/kraftd/internal/probe"
)

// Record size and the steady rate at which latency is measured.
const (
	benchRecordBytes = 1024
	benchLatencyRate = 2000 // records/s: 2 MB/s, far below saturation
	benchLatencyTime = 3 * time.Second
	// benchFloorBytes is the least a floor moves: fewer bytes measure the
	// page cache and one fdatasync's fixed cost more than the disk.
	benchFloorBytes = 256 << 20
)

// BenchmarkDataPlane is issue 13's data-plane benchmark, every figure from one
// run: franz-go (idempotent, acks=-1, no compression, 1 KB random records)
// against a kraftd cluster of separate processes (3 controllers, 3 brokers,
// a 3-partition topic with RF 3), and against franz-go's kfake (3 in-memory
// brokers in a child process: a single-process in-memory ceiling that
// neither replicates nor writes to disk, not Kafka); then the floors of this
// machine: a loopback TCP copy and a file write with one fdatasync at the
// end, each of as many bytes as the produce run and at least 256 MiB.
// Sub-benchmarks:
//
//   - <target>/produce: b.N records queued at once; MB/s of acknowledged
//     records.
//   - <target>/latency: the gap probe at 2000 records/s, 3 s once settled;
//     p50/p99 of send-to-ack latency (b.N is ignored).
//   - <target>/consume: a fresh consumer reads b.N records (produced by
//     produce) from the start; MB/s.
//
// The parent logs a table with the ratios. make bench-data runs it:
//
//	go test ./cmd/kraftd -run '^$' -bench DataPlane -benchtime 200000x -v
func BenchmarkDataPlane(b *testing.B) {
	if testing.Short() {
		b.Skip("multi-process benchmark")
	}
	type figures struct{ produce, p50, p99, consume float64 }
	got := map[string]*figures{"kraftd": {}, "kfake": {}}
	var loopback, disk float64
	value := make([]byte, benchRecordBytes)
	_, _ = rand.Read(value) // incompressible

	kc := newProcCluster(b, buildBinary(b), 3, 3)
	fake := startKfakeChild(b)
	targets := []struct {
		name      string
		bootstrap []string
	}{{"kraftd", nil}, {"kfake", fake}}
	for _, tg := range targets {
		bootstrap := tg.bootstrap
		if bootstrap == nil {
			eventually(b, "3 brokers listed", 30*time.Second, func() bool {
				v, err := metadataView(kc.procs[4].addr())
				return err == nil && len(v.brokers) == 3
			})
			bootstrap = kc.brokerAddrs()
		}
		createBenchTopic(b, bootstrap, "bench")
		createBenchTopic(b, bootstrap, "latency")
		f := got[tg.name]
		produced := 0
		b.Run(tg.name+"/produce", func(b *testing.B) {
			f.produce = produceAll(b, bootstrap, "bench", value, b.N)
			produced += b.N
			b.ReportMetric(f.produce, "MB/s")
		})
		b.Run(tg.name+"/latency", func(b *testing.B) {
			p50, p99 := steadyLatency(b, bootstrap, "latency")
			f.p50, f.p99 = p50.Seconds()*1e3, p99.Seconds()*1e3
			b.ReportMetric(f.p50, "p50-ms")
			b.ReportMetric(f.p99, "p99-ms")
		})
		b.Run(tg.name+"/consume", func(b *testing.B) {
			f.consume = consumeN(b, bootstrap, "bench", min(b.N, produced))
			b.ReportMetric(f.consume, "MB/s")
		})
	}
	var volume int
	b.Run("floor/loopback-copy", func(b *testing.B) {
		volume = b.N * benchRecordBytes
		loopback = loopbackCopy(b, max(volume, benchFloorBytes))
		b.ReportMetric(loopback, "MB/s")
	})
	b.Run("floor/disk-write", func(b *testing.B) {
		disk = diskWrite(b, max(b.N*benchRecordBytes, benchFloorBytes))
		b.ReportMetric(disk, "MB/s")
	})
	k, f := got["kraftd"], got["kfake"]
	b.Logf(`data plane, %d B records, acks=-1, RF 3 (kraftd: 3 broker processes, each byte written to 3 logs on this one disk; kfake: in memory, no replication), %.1f MB a run:
| | kraftd | kfake (in-memory ceiling, not Kafka) | kraftd / kfake |
|---|---|---|---|
| produce MB/s | %.1f | %.1f | %.2f |
| produce latency p50 at %.1f MB/s (ms) | %.2f | %.2f | %.2f |
| produce latency p99 at %.1f MB/s (ms) | %.2f | %.2f | %.2f |
| consume MB/s | %.1f | %.1f | %.2f |
floors (at least 256 MiB each): loopback TCP copy %.0f MB/s, disk write + fdatasync %.0f MB/s; kraftd produce is %.3f of the loopback floor and %.3f of the disk floor (%.3f counting its 3 replicas), consume %.3f of the loopback floor`,
		benchRecordBytes, float64(volume)/1e6,
		k.produce, f.produce, k.produce/f.produce,
		benchLatencyRate*benchRecordBytes/1e6, k.p50, f.p50, k.p50/f.p50,
		benchLatencyRate*benchRecordBytes/1e6, k.p99, f.p99, k.p99/f.p99,
		k.consume, f.consume, k.consume/f.consume,
		loopback, disk, k.produce/loopback, k.produce/disk, 3*k.produce/disk, k.consume/loopback)
}

func createBenchTopic(b *testing.B, bootstrap []string, topic string) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if r, err := kadm.NewClient(cl).CreateTopic(ctx, 3, 3, nil, topic); err != nil || r.Err != nil {
		b.Fatalf("create %s: %v %v", topic, err, r.Err)
	}
	// Every partition has a leader on the bootstrap brokers before timing.
	eventually(b, topic+" led everywhere", 30*time.Second, func() bool {
		for _, addr := range bootstrap {
			v, err := metadataView(addr)
			if err != nil || len(v.topics[topic]) != 3 || v.leads(-1) {
				return false
			}
		}
		return true
	})
}

// produceAll queues n records at once (franz-go blocks past its buffer) and
// returns the MB/s until the last is acknowledged.
func produceAll(b *testing.B, bootstrap []string, topic string, value []byte, n int) float64 {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Warm the connection and metadata outside the timing.
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	b.ResetTimer()
	start := time.Now()
	for range n {
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				firstErr = cmpOr(firstErr, err)
				mu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	return float64(n*len(value)) / elapsed.Seconds() / 1e6
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// steadyLatency runs the gap probe at benchLatencyRate and returns its
// latency p50 and p99 over benchLatencyTime once it has settled (a fresh
// topic's first writes can wait for a follower's fetch backoff).
func steadyLatency(b *testing.B, bootstrap []string, topic string) (p50, p99 time.Duration) {
	p, err := probe.Start(probe.Config{Bootstrap: bootstrap, Topic: topic, Rate: benchLatencyRate, ValueBytes: benchRecordBytes})
	if err != nil {
		b.Fatal(err)
	}
	eventually(b, "the probe to settle", 30*time.Second, func() bool { return p.Settled(200 * time.Millisecond) })
	from := p.Since()
	<-time.After(benchLatencyTime) // the measurement window, not a readiness wait
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	whole := p.Stop(ctx)
	r := p.Result(from, whole.Window)
	if r.Failed > 0 || r.Acked == 0 {
		b.Fatalf("latency run: %v", r)
	}
	return r.P50, r.P99
}

// consumeN reads n records of topic from the start with a new consumer and
// returns MB/s.
func consumeN(b *testing.B, bootstrap []string, topic string, n int) float64 {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	b.ResetTimer()
	start := time.Now()
	bytes := 0
	for read := 0; read < n; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			b.Fatalf("read %d of %d records: %v", read, n, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			read++
			bytes += len(r.Value)
		})
	}
	elapsed := time.Since(start)
	b.StopTimer()
	return float64(bytes) / elapsed.Seconds() / 1e6
}

// loopbackCopy writes volume bytes in 1 MiB writes through a loopback TCP
// connection to a reader that discards them; MB/s.
func loopbackCopy(b *testing.B, volume int) float64 {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	read := make(chan error, 1)
	go func() { // owned here: ends when the writer closes the connection
		c, err := ln.Accept()
		if err != nil {
			read <- err
			return
		}
		defer c.Close()
		_, err = io.Copy(io.Discard, c)
		read <- err
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	_, _ = rand.Read(buf)
	b.ResetTimer()
	start := time.Now()
	for left := volume; left > 0; left -= len(buf) {
		if _, err := c.Write(buf[:min(left, len(buf))]); err != nil {
			b.Fatal(err)
		}
	}
	c.Close()
	if err := <-read; err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	return float64(volume) / elapsed.Seconds() / 1e6
}

// diskWrite writes volume bytes in 1 MiB writes to a new file on the file
// system the brokers' logs are on (the test's temporary directory), then
// fdatasyncs once; MB/s.
func diskWrite(b *testing.B, volume int) float64 {
	f, err := os.Create(filepath.Join(b.TempDir(), "floor"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	_, _ = rand.Read(buf)
	b.ResetTimer()
	start := time.Now()
	for left := volume; left > 0; left -= len(buf) {
		if _, err := f.Write(buf[:min(left, len(buf))]); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	return float64(volume) / elapsed.Seconds() / 1e6
}

// kfakeChildEnv makes the test binary a kfake server (TestKfakeChild).
const kfakeChildEnv = "KRAFTD_KFAKE_CHILD"

// startKfakeChild runs franz-go's kfake with 3 brokers in a child process
// (this test binary, TestKfakeChild), so it is as separate from the client as
// the kraftd brokers are, and returns its addresses. The child ends when its
// stdin closes; cleanup closes it and waits.
func startKfakeChild(b *testing.B) []string {
	cmd := exec.Command(os.Args[0], "-test.run=^TestKfakeChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), kfakeChildEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			b.Errorf("kfake child: %v\n%s", err, out.String())
		}
	})
	var addrs []string
	eventually(b, "the kfake child's addresses", 10*time.Second, func() bool {
		_, rest, ok := strings.Cut(out.String(), "kfake listening on ")
		line, _, complete := strings.Cut(rest, "\n")
		if ok && complete {
			addrs = strings.Split(line, ",")
		}
		return addrs != nil
	})
	return addrs
}

// TestKfakeChild is not a test: with KRAFTD_KFAKE_CHILD set it serves kfake
// for BenchmarkDataPlane until its stdin closes.
func TestKfakeChild(t *testing.T) {
	if os.Getenv(kfakeChildEnv) == "" {
		t.Skip("the kfake server of BenchmarkDataPlane; runs only as its child")
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addrs := slices.Clone(c.ListenAddrs())
	fmt.Printf("kfake listening on %s\n", strings.Join(addrs, ","))
	_, _ = io.Copy(io.Discard, os.Stdin)
}
