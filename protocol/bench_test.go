package protocol

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkApiVersionsPipelined drives pipelined ApiVersions v3 round trips
// over one loopback connection, first against kraftd's server and then
// against franz-go's kfake with the same raw driver, and reports how many
// times kfake's throughput kraftd reached (sub-benchmark "ratio"). Our
// registry serves every kmsg key so both answers are similarly large.
func BenchmarkApiVersionsPipelined(b *testing.B) {
	var oursNs, kfakeNs float64
	b.Run("kraftd", func(b *testing.B) {
		s, err := NewServer(ServerConfig{Listeners: []ListenerConfig{{Name: "PLAINTEXT", Addr: "127.0.0.1:0", Registry: fuzzRegistry()}}})
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Start(); err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		oursNs = drivePipelined(b, s.Addr("PLAINTEXT").String())
	})
	b.Run("kfake", func(b *testing.B) {
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		kfakeNs = drivePipelined(b, c.ListenAddrs()[0])
	})
	b.Run("ratio", func(b *testing.B) {
		if oursNs == 0 || kfakeNs == 0 {
			b.Skip("needs both kraftd and kfake sub-benchmarks")
		}
		b.ReportMetric(kfakeNs/oursNs, "x_kfake_throughput")
	})
}

// benchWindow bounds requests in flight so neither server is asked to
// buffer an unbounded backlog; 128 is deep enough to keep the pipe full.
const benchWindow = 128

// drivePipelined sends b.N ApiVersions requests on one raw connection,
// writing in batches while a reader checks every correlation id, and
// returns the measured ns per round trip.
func drivePipelined(b *testing.B, addr string) float64 {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "bench", "1.0"
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench")).AppendRequest(nil, req, 0)
	slots := make(chan struct{}, benchWindow)
	readErr := make(chan error, 1)
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	wg.Go(func() { readErr <- readPipelined(nc, b.N, slots) })
	writeErr := writePipelined(nc, frame, b.N, slots)
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if writeErr != nil {
		b.Fatal(writeErr)
	}
	if err := <-readErr; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
	return float64(elapsed.Nanoseconds()) / float64(b.N)
}

// writePipelined writes n copies of frame with correlation ids 0..n-1,
// batching as many as the window allows into each write.
func writePipelined(nc net.Conn, frame []byte, n int, slots chan struct{}) error {
	batch := make([]byte, 0, len(frame)*benchWindow)
	for i := 0; i < n; {
		slots <- struct{}{}
		batch = appendWithCorr(batch[:0], frame, int32(i))
		i++
	fill:
		for i < n {
			select {
			case slots <- struct{}{}:
				batch = appendWithCorr(batch, frame, int32(i))
				i++
			default:
				break fill
			}
		}
		if _, err := nc.Write(batch); err != nil {
			return err
		}
	}
	return nil
}

func appendWithCorr(dst, frame []byte, corr int32) []byte {
	start := len(dst)
	dst = append(dst, frame...)
	binary.BigEndian.PutUint32(dst[start+8:], uint32(corr)) // size(4) key(2) version(2)
	return dst
}

// readPipelined reads n responses, checking they come back in order.
func readPipelined(nc net.Conn, n int, slots chan struct{}) error {
	br := bufio.NewReaderSize(nc, 64<<10)
	var hdr [8]byte
	for i := range n {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return err
		}
		if corr := int32(binary.BigEndian.Uint32(hdr[4:])); corr != int32(i) {
			return fmt.Errorf("response %d has correlation id %d", i, corr)
		}
		if _, err := br.Discard(int(binary.BigEndian.Uint32(hdr[:])) - 4); err != nil {
			return err
		}
		<-slots
	}
	return nil
}
