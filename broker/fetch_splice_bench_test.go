package broker

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/replica"
	"github.com/kraftd/kraftd/storage"
)

// BenchmarkFetchConsume is a consumer reading a 16 MiB partition from the
// start over loopback TCP, 1 MiB per Fetch (max.partition.fetch.bytes'
// default) in 512 KiB batches of 1 KiB records, through the real protocol
// server: records sent from the segment files (sendfile) against read into
// memory and encoded (copy), side by side. The client reads every byte and
// decodes nothing. Ratio: sendfile MB/s over copy MB/s.
//
//	go test ./broker -run '^$' -bench BenchmarkFetchConsume -count 3
func BenchmarkFetchConsume(b *testing.B) {
	const batches, perBatch, recordBytes = 32, 512, 1 << 10
	d := newDataHarness(b, 1<<20)
	demo, _ := d.replicas.Partition(replica.TopicPartition{Topic: "demo", Partition: 0})
	recs := make([]storage.Record, perBatch)
	for i := range recs {
		recs[i] = storage.Record{Value: make([]byte, recordBytes)}
	}
	var batchSize int
	for range batches {
		raw := storage.EncodeBatch(0, -1, time.Now().UnixMilli(), false, recs).Raw
		batchSize = len(raw)
		if _, err := demo.AppendAsLeader(raw, replica.AppendOptions{RequiredAcks: 1, MinInsyncReplicas: 1, LogAppendTimeMs: -1}); err != nil {
			b.Fatal(err)
		}
	}
	for _, mode := range []struct {
		name string
		copy bool
	}{{"copy", true}, {"sendfile", false}} {
		b.Run(mode.name, func(b *testing.B) {
			d.b.api.copyRecords.Store(mode.copy)
			nc, err := net.Dial("tcp", d.addr)
			if err != nil {
				b.Fatal(err)
			}
			defer nc.Close()
			br := bufio.NewReaderSize(nc, 64<<10)
			f := kmsg.NewRequestFormatter()
			buf := make([]byte, 4<<20)
			var req []byte
			b.SetBytes(int64(batches * batchSize))
			b.ResetTimer()
			for range b.N {
				for off := int64(0); off < batches*perBatch; off += 2 * perBatch {
					fr := fetchReq(11, "demo", d.demoID, 0, off)
					fr.MaxBytes, fr.Topics[0].Partitions[0].PartitionMaxBytes = 50<<20, int32(2*batchSize)
					req = f.AppendRequest(req[:0], fr, 1)
					if _, err := nc.Write(req); err != nil {
						b.Fatal(err)
					}
					if _, err := io.ReadFull(br, buf[:4]); err != nil {
						b.Fatal(err)
					}
					n := int(binary.BigEndian.Uint32(buf))
					if n < 2*batchSize || n > len(buf) {
						b.Fatalf("response of %d bytes, want two %d-byte batches", n, batchSize)
					}
					if _, err := io.ReadFull(br, buf[:n]); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
