package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"sync"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Spliced responses: parts of a response sent straight from files, as
// Kafka's FileRecords.writeTo sends a Fetch's records with
// FileChannel.transferTo. The handler encodes everything but the file
// parts; the writer sends the encoded bytes with write(2) and each file
// part with sendfile(2) (linux, plain TCP: the records never enter user
// space), or, on any other connection or platform, by reading the file
// into a pooled buffer and writing that (the copy). Either way the bytes on
// the wire are exactly those of the whole encoded response; the frame's
// size prefix counts the file parts.
//
// Back-pressure, deadlines and ordering are as for any response: the frame
// costs its full wire size in the connection's budget, it is written under
// the same write deadline, in queue order, by the same writer goroutine.

// FileRegion is part of a response to be sent from a file.
type FileRegion interface {
	// Section is the open file and the byte range [offset, offset+length)
	// to send. The file stays open until the response is released; its
	// file offset is never used (reads and sendfile take explicit offsets,
	// the file may be shared).
	Section() (f *os.File, offset, length int64)
	// Check returns an error when the bytes may no longer be the ones the
	// region was read as (a truncation of the file since). The writer asks
	// before and after sending the region; an error closes the connection
	// in the middle of the frame, so the peer never takes other bytes for
	// the response (Kafka fails the send the same way, "truncated during
	// write").
	Check() error
}

// Splice places a FileRegion in a response body.
type Splice struct {
	// At is the index, in the bytes AppendSpliced returned, before which
	// the region's bytes go.
	At     int
	Region FileRegion
}

// SplicedResponse is a response whose encoding has FileRegions in it. The
// server writes it as AppendSpliced says and then calls Release; a
// response that is never written (the connection died) is released too.
type SplicedResponse interface {
	kmsg.Response
	// AppendSpliced appends the body as AppendTo would, except that the
	// regions' bytes are left out: splices says where each goes, At
	// ascending.
	AppendSpliced(dst []byte) (out []byte, splices []Splice)
	// Release is called exactly once, when the server is done with the
	// response (written or dropped).
	Release()
}

// ErrRegionShort: a file region's file ended before the region did (it was
// truncated after the region was read); the connection is closed.
var ErrRegionShort = errors.New("protocol: file region shorter than its response part")

// outFrame is one queued response frame: buf, with the regions of splices
// sent before the given indexes of buf.
//
// INVARIANTS: size == len(buf) + the regions' lengths; splices' At are
// ascending within [0, len(buf)]; release is nil unless splices came from a
// SplicedResponse, and is called once.
type outFrame struct {
	buf     []byte
	splices []Splice
	release func()
	size    int
}

// appendFrame encodes resp as a frame into dst (see appendResponse); a
// SplicedResponse leaves its regions out of buf.
func appendFrame(dst []byte, correlationID int32, resp kmsg.Response) (outFrame, error) {
	sr, ok := resp.(SplicedResponse)
	if !ok {
		buf := appendResponse(dst, correlationID, resp)
		return outFrame{buf: buf, size: len(buf)}, nil
	}
	f := outFrame{release: sr.Release}
	dst = append(dst[:0], 0, 0, 0, 0)
	dst = kbin.AppendInt32(dst, correlationID)
	if resp.IsFlexible() && resp.Key() != apiVersionsKey {
		dst = append(dst, 0)
	}
	f.buf, f.splices = sr.AppendSpliced(dst)
	size := int64(len(f.buf))
	prev := len(dst)
	for _, sp := range f.splices {
		_, _, n := sp.Region.Section()
		if sp.At < prev || sp.At > len(f.buf) || n < 0 {
			f.done(nil)
			return outFrame{}, fmt.Errorf("protocol: splice at %d of %d bytes (after %d), %d long", sp.At, len(f.buf), prev, n)
		}
		prev = sp.At
		size += n
	}
	if size-4 > math.MaxInt32 {
		f.done(nil)
		return outFrame{}, fmt.Errorf("protocol: response of %d bytes", size)
	}
	binary.BigEndian.PutUint32(f.buf, uint32(size-4))
	f.size = int(size)
	return f, nil
}

// done returns the frame's buffer to the pool (c may be nil: not pooled)
// and releases its regions.
func (f *outFrame) done(c *conn) {
	if c != nil {
		c.recycle(f.buf)
	}
	if f.release != nil {
		f.release()
		f.release = nil
	}
}

// coalescer gathers small writes into one buffer, so that several
// responses leave in one write(2).
type coalescer struct {
	nc  net.Conn
	buf []byte
}

func (w *coalescer) write(p []byte) error {
	if len(w.buf) > 0 && len(w.buf)+len(p) > cap(w.buf) {
		if err := w.flush(); err != nil {
			return err
		}
	}
	if len(p) >= cap(w.buf) {
		_, err := w.nc.Write(p)
		return err
	}
	w.buf = append(w.buf, p...)
	return nil
}

func (w *coalescer) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	_, err := w.nc.Write(w.buf)
	w.buf = w.buf[:0]
	return err
}

// sendRegion writes r to the connection: sendfile where sendFile can,
// else a copy through a pooled buffer.
func (c *conn) sendRegion(r FileRegion) error {
	if err := r.Check(); err != nil {
		return err
	}
	f, off, n := r.Section()
	sent, handled, err := sendFile(c.nc, f, off, n)
	if handled {
		c.srv.regionFileBytes.Add(sent)
	} else {
		sent, err = copyRegion(c.nc, f, off, n)
		c.srv.regionCopyBytes.Add(sent)
	}
	if err != nil {
		return err
	}
	return r.Check()
}

var copyBufPool = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// copyRegion is the fallback: pread into a buffer, write it.
func copyRegion(nc net.Conn, f *os.File, off, n int64) (int64, error) {
	bp := copyBufPool.Get().(*[]byte)
	defer copyBufPool.Put(bp)
	var sent int64
	for sent < n {
		buf := (*bp)[:min(int64(len(*bp)), n-sent)]
		k, err := f.ReadAt(buf, off+sent)
		if k < len(buf) {
			if err == nil || errors.Is(err, io.EOF) {
				err = ErrRegionShort
			}
			return sent, fmt.Errorf("%w: %s at %d: %w", ErrRegionShort, f.Name(), off+sent, err)
		}
		if _, err := nc.Write(buf); err != nil {
			return sent, err
		}
		sent += int64(k)
	}
	return sent, nil
}

// RegionBytes reports the file-region bytes this server has sent: with
// sendfile, and copied through user space (a connection or platform
// without sendfile).
func (s *Server) RegionBytes() (sendfile, copied int64) {
	return s.regionFileBytes.Load(), s.regionCopyBytes.Load()
}
