package protocol

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// testRegion is a FileRegion of a test file; check fails it on demand.
type testRegion struct {
	f         *os.File
	off, n    int64
	check     func() error
	checkRuns atomic.Int32
}

func (r *testRegion) Section() (*os.File, int64, int64) { return r.f, r.off, r.n }
func (r *testRegion) Check() error {
	r.checkRuns.Add(1)
	if r.check != nil {
		return r.check()
	}
	return nil
}

// splicedMetadata answers Metadata with the encoding of full, of which the
// byte ranges cut out are sent from a file.
type splicedMetadata struct {
	*kmsg.MetadataResponse
	body     []byte // full's encoding
	cuts     [][2]int
	regions  []*testRegion
	released *atomic.Int32
}

func (s *splicedMetadata) AppendSpliced(dst []byte) ([]byte, []Splice) {
	var splices []Splice
	at := 0
	for i, c := range s.cuts {
		dst = append(dst, s.body[at:c[0]]...)
		splices = append(splices, Splice{At: len(dst), Region: s.regions[i]})
		at = c[1]
	}
	return append(dst, s.body[at:]...), splices
}

func (s *splicedMetadata) Release() { s.released.Add(1) }

// spliceFile writes body's cut ranges, each after some junk, to a file and
// returns regions of them.
func spliceFile(t *testing.T, body []byte, cuts [][2]int) []*testRegion {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "segment"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	var regions []*testRegion
	var pos int64
	for _, c := range cuts {
		junk := bytes.Repeat([]byte{0xee}, 7)
		part := body[c[0]:c[1]]
		if _, err := f.WriteAt(append(junk, part...), pos); err != nil {
			t.Fatal(err)
		}
		regions = append(regions, &testRegion{f: f, off: pos + int64(len(junk)), n: int64(len(part))})
		pos += int64(len(junk) + len(part))
	}
	return regions
}

// bigMetadataResponse is a Metadata response whose topic names make it large.
func bigMetadataResponse(version int16, topics int) *kmsg.MetadataResponse {
	resp := kmsg.NewPtrMetadataResponse()
	resp.SetVersion(version)
	for i := range topics {
		rt := kmsg.NewMetadataResponseTopic()
		name := strings.Repeat(string(rune('a'+i%26)), 20000+i)
		rt.Topic = &name
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// A spliced response is on the wire byte for byte as the plain encoding,
// its regions sent with sendfile, for flexible and non-flexible versions,
// several regions per frame, pipelined; each response is released once.
func TestSplicedResponseBytes(t *testing.T) {
	var released atomic.Int32
	var regionBytes int64
	s := startTestServer(t, func(_ *ServerConfig, reg *Registry) {
		reg.Register(3, 0, 12, func(_ context.Context, req *Request) (kmsg.Response, error) {
			full := bigMetadataResponse(req.Version, 3)
			body := full.AppendTo(nil)
			third := len(body) / 3
			cuts := [][2]int{{10, third}, {third, third + 5}, {2 * third, len(body)}}
			if req.Version%2 == 0 { // also: a region right at the start, two adjacent
				cuts = [][2]int{{0, 3}, {3, third}, {2 * third, 2*third + 1}}
			}
			for _, c := range cuts {
				regionBytes += int64(c[1] - c[0])
			}
			return &splicedMetadata{MetadataResponse: full, body: body, cuts: cuts,
				regions: spliceFile(t, body, cuts), released: &released}, nil
		})
	})
	c := dialRaw(t, s.addr)
	for v := int16(0); v <= 12; v++ {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(v)
		c.send(req, int32(v)) // pipelined: all sent before any is read
	}
	for v := int16(0); v <= 12; v++ {
		got, err := c.readFrame()
		if err != nil {
			t.Fatal(err)
		}
		want := appendResponse(nil, int32(v), bigMetadataResponse(v, 3))[4:]
		if !bytes.Equal(got, want) {
			t.Fatalf("v%d: %d bytes on the wire, want %d; differ at %d", v, len(got), len(want), firstDiff(got, want))
		}
	}
	waitFor(t, "13 releases", func() bool { return released.Load() == 13 })
	file, copied := s.RegionBytes()
	if file != regionBytes || copied != 0 {
		t.Fatalf("region bytes: %d by sendfile, %d copied; want %d by sendfile", file, copied, regionBytes)
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// A region whose file was cut under it (Check fails, or the file ends
// before the region) closes the connection in the middle of the frame:
// the peer gets fewer bytes than the size prefix says, never other bytes;
// the response is released.
func TestSplicedResponseTruncated(t *testing.T) {
	for _, tc := range []struct {
		name    string
		breakIt func(r *testRegion)
	}{
		{"check", func(r *testRegion) { r.check = func() error { return errors.New("truncated since the read") } }},
		{"short file", func(r *testRegion) { r.n += 1 << 20 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var released atomic.Int32
			s := startTestServer(t, func(_ *ServerConfig, reg *Registry) {
				reg.Register(3, 0, 12, func(_ context.Context, req *Request) (kmsg.Response, error) {
					full := bigMetadataResponse(req.Version, 2)
					body := full.AppendTo(nil)
					cuts := [][2]int{{5, 100}, {200, len(body)}}
					regions := spliceFile(t, body, cuts)
					tc.breakIt(regions[1])
					return &splicedMetadata{MetadataResponse: full, body: body, cuts: cuts,
						regions: regions, released: &released}, nil
				})
			})
			c := dialRaw(t, s.addr)
			req := kmsg.NewPtrMetadataRequest()
			req.SetVersion(9)
			c.send(req, 1)
			c.nc.SetReadDeadline(time.Now().Add(testTimeout))
			got, err := io.ReadAll(c.br) // until the server closes
			want := appendResponse(nil, 1, bigMetadataResponse(9, 2))
			if err != nil || len(got) < 4 || len(got)-4 >= int(binary.BigEndian.Uint32(got)) {
				t.Fatalf("read %d bytes (%v); want the connection closed within the frame", len(got), err)
			}
			if n := firstDiff(got[4:], want[4:]); n < len(got)-4 {
				t.Fatalf("byte %d of the partial frame differs from the response", n)
			}
			waitFor(t, "the release", func() bool { return released.Load() == 1 })
		})
	}
}

// Without sendfile (any connection but plain TCP) a region is copied.
func TestRegionCopyFallback(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789"), 20000)
	regions := spliceFile(t, body, [][2]int{{3, len(body) - 3}})
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	f, off, n := regions[0].Section()
	if _, handled, _ := sendFile(a, f, off, n); handled {
		t.Fatal("sendfile claimed a pipe")
	}
	got := make(chan []byte, 1)
	go func() { buf, _ := io.ReadAll(io.LimitReader(b, n)); got <- buf }()
	if sent, err := copyRegion(a, f, off, n); err != nil || sent != n {
		t.Fatalf("copied %d of %d: %v", sent, n, err)
	}
	if g := <-got; !bytes.Equal(g, body[3:len(body)-3]) {
		t.Fatalf("copied bytes differ at %d", firstDiff(g, body[3:]))
	}
	go func() { _, _ = io.Copy(io.Discard, b) }()
	if _, err := copyRegion(a, f, off, n+1); !errors.Is(err, ErrRegionShort) {
		t.Fatalf("past the file end: %v", err)
	}
}
