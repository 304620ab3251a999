package broker

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/replica"
	"github.com/kraftd/kraftd/storage"
)

// BenchmarkFetchConsume is a consumer reading a 16 MiB partition from the
// start over loopback TCP, 1 MiB per Fetch (max.partition.fetch.bytes'
// default) in 512 KiB batches of 1 KiB records, through the real protocol
// server: records sent from the segment files (sendfile) against read into
// memory and encoded (copy). The client reads every byte and decodes
// nothing. "copy" and "sendfile" run one mode each (for -benchmem);
// "side-by-side" alternates the two passes in every iteration, so that a
// loaded machine slows both alike, and reports each mode's MB/s and the
// ratio sendfile/copy.
//
//	go test ./broker -run '^$' -bench BenchmarkFetchConsume -count 3 -benchmem
func BenchmarkFetchConsume(b *testing.B) {
	d := newDataHarness(b, 1<<20)
	c := newConsumeBench(b, d)
	for _, mode := range []struct {
		name string
		copy bool
	}{{"copy", true}, {"sendfile", false}} {
		b.Run(mode.name, func(b *testing.B) {
			d.b.api.copyRecords.Store(mode.copy)
			b.SetBytes(c.logBytes)
			for range b.N {
				c.consume(b)
			}
		})
	}
	b.Run("side-by-side", func(b *testing.B) {
		var copyNs, fileNs int64
		for range b.N {
			for _, copyRecords := range []bool{true, false} {
				d.b.api.copyRecords.Store(copyRecords)
				start := time.Now()
				c.consume(b)
				if copyRecords {
					copyNs += time.Since(start).Nanoseconds()
				} else {
					fileNs += time.Since(start).Nanoseconds()
				}
			}
		}
		mb := float64(c.logBytes) * float64(b.N) / 1e6
		b.ReportMetric(mb/(float64(copyNs)/1e9), "copy_MB/s")
		b.ReportMetric(mb/(float64(fileNs)/1e9), "sendfile_MB/s")
		b.ReportMetric(float64(copyNs)/float64(fileNs), "ratio")
	})
}

// consumeBench is the benchmark's log and its consumer's connection.
type consumeBench struct {
	d         *dataHarness
	nc        net.Conn
	br        *bufio.Reader
	f         *kmsg.RequestFormatter
	req, buf  []byte
	batchSize int
	logBytes  int64
}

const benchBatches, benchPerBatch, benchRecordBytes = 32, 512, 1 << 10

func newConsumeBench(b *testing.B, d *dataHarness) *consumeBench {
	demo, _ := d.replicas.Partition(replica.TopicPartition{Topic: "demo", Partition: 0})
	recs := make([]storage.Record, benchPerBatch)
	for i := range recs {
		recs[i] = storage.Record{Value: make([]byte, benchRecordBytes)}
	}
	c := &consumeBench{d: d, f: kmsg.NewRequestFormatter(), buf: make([]byte, 4<<20)}
	for range benchBatches {
		raw := storage.EncodeBatch(0, -1, time.Now().UnixMilli(), false, recs).Raw
		c.batchSize = len(raw)
		c.logBytes += int64(len(raw))
		if _, err := demo.AppendAsLeader(raw, replica.AppendOptions{RequiredAcks: 1, MinInsyncReplicas: 1, LogAppendTimeMs: -1}); err != nil {
			b.Fatal(err)
		}
	}
	nc, err := net.Dial("tcp", d.addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { nc.Close() })
	c.nc, c.br = nc, bufio.NewReaderSize(nc, 64<<10)
	return c
}

// consume reads the whole log, two batches per Fetch.
func (c *consumeBench) consume(b *testing.B) {
	for off := int64(0); off < benchBatches*benchPerBatch; off += 2 * benchPerBatch {
		fr := fetchReq(11, "demo", c.d.demoID, 0, off)
		fr.MaxBytes, fr.Topics[0].Partitions[0].PartitionMaxBytes = 50<<20, int32(2*c.batchSize)
		c.req = c.f.AppendRequest(c.req[:0], fr, 1)
		if _, err := c.nc.Write(c.req); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c.br, c.buf[:4]); err != nil {
			b.Fatal(err)
		}
		n := int(binary.BigEndian.Uint32(c.buf))
		if n < 2*c.batchSize || n > len(c.buf) {
			b.Fatalf("response of %d bytes, want two %d-byte batches", n, c.batchSize)
		}
		if _, err := io.ReadFull(c.br, c.buf[:n]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFetchConsumeFranz is BenchmarkFetchConsume's log read by a
// franz-go consumer (its defaults: 1 MiB per partition, 50 MiB per Fetch;
// it checks CRCs and decodes every record), a new client per pass, copy and
// sendfile passes alternating in each iteration. On a 2-core machine the
// client shares the CPU with the broker, so the ratio is what a consumer on
// the same host would see.
//
//	go test ./broker -run '^$' -bench BenchmarkFetchConsumeFranz -count 3
func BenchmarkFetchConsumeFranz(b *testing.B) {
	d := newDataHarness(b, 1<<20)
	c := newConsumeBench(b, d)
	_, portText, _ := net.SplitHostPort(d.addr)
	port, _ := strconv.Atoi(portText)
	d.commit(brokerRecord(1, 20, false, nil, ep("PLAINTEXT", uint16(port)))) // the address clients are told
	var copyNs, fileNs int64
	b.ResetTimer()
	for range b.N {
		for _, copyRecords := range []bool{true, false} {
			d.b.api.copyRecords.Store(copyRecords)
			start := time.Now()
			franzConsumeAll(b, d.addr, benchBatches*benchPerBatch)
			if copyRecords {
				copyNs += time.Since(start).Nanoseconds()
			} else {
				fileNs += time.Since(start).Nanoseconds()
			}
		}
	}
	mb := float64(c.logBytes) * float64(b.N) / 1e6
	b.ReportMetric(mb/(float64(copyNs)/1e9), "copy_MB/s")
	b.ReportMetric(mb/(float64(fileNs)/1e9), "sendfile_MB/s")
	b.ReportMetric(float64(copyNs)/float64(fileNs), "ratio")
}

// franzConsumeAll reads demo-0 from the start until it has want records.
func franzConsumeAll(b *testing.B, addr string, want int) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"demo": {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for got := 0; got < want; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			b.Fatalf("after %d records: %v", got, err)
		}
		got += fs.NumRecords()
	}
}
