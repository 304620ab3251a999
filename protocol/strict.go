package protocol

import (
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Strict decoding.
//
// kmsg's readers are lenient where Kafka's generated readers are not: a
// negative count on a non-nullable array decodes as an empty array and a
// -1 length on non-nullable bytes as empty bytes, so CreateTopics v0 with a
// topics count of -2 reaches the handler as a request with no topics.
// Kafka throws ("non-nullable field ... was serialized as null") and the
// connection is closed. Lengths past the end of the frame and negative
// lengths on non-nullable strings already fail inside kmsg.
//
// checkStrict finds the lenient cases without a schema of its own: it
// re-encodes the decoded body and compares the bytes with the ones it was
// decoded from. Every lenient read changes the encoding (an empty array
// encodes its count as 0, not as the -2 that was sent), so any difference
// is a parse failure, except the one Kafka allows: a nullable field whose
// length is any negative number is null, and re-encodes as -1 (0xffff or
// 0xffffffff), or as 0 in the compact form when a huge varint made the
// length negative. Those windows are skipped.
//
// Encodings Kafka tolerates and this check refuses, none of which a real
// client writes: a varint with redundant continuation bytes, a boolean
// byte other than 0 or 1, the same tag twice in one tag section, and an
// unknown tag before a tag kmsg knows. Bytes after a complete body are
// tolerated, as before.

// strictScratch holds re-encoding buffers; big ones are not kept.
var strictScratch = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

const strictScratchKeep = 64 << 10

// checkStrict returns an error when body, decoded from src, was read
// leniently (see above).
func checkStrict(body kmsg.Request, src []byte) error {
	bufp := strictScratch.Get().(*[]byte)
	enc := body.AppendTo((*bufp)[:0])
	err := compareEncoding(src, enc)
	if cap(enc) <= strictScratchKeep {
		*bufp = enc[:0]
		strictScratch.Put(bufp)
	}
	return err
}

// compareEncoding reports whether src is enc, up to trailing bytes in src
// and null windows (see nullWindows). The fast path is one bytes compare.
func compareEncoding(src, enc []byte) error {
	if len(src) >= len(enc) && string(src[:len(enc)]) == string(enc) {
		return nil
	}
	if at, ok := matchFrom(src, enc, 0, 0, make(map[[2]int]bool)); !ok {
		return fmt.Errorf("field at byte %d does not parse as Kafka parses it (negative or out-of-range length)", at)
	}
	return nil
}

// matchFrom walks src and enc in step from (i, j). At a difference it
// tries each null window that could explain it, depth first; seen holds
// the (i, j) differences already tried, so the walk is linear in practice
// and bounded by len(src)*windows in the worst case. It returns the src
// offset of the first difference it could not explain.
func matchFrom(src, enc []byte, i, j int, seen map[[2]int]bool) (int, bool) {
	for j < len(enc) && i < len(src) && src[i] == enc[j] {
		i++
		j++
	}
	if j == len(enc) {
		return 0, true
	}
	if seen[[2]int{i, j}] {
		return i, false
	}
	seen[[2]int{i, j}] = true
	for _, w := range nullWindows(src, enc, i, j) {
		if _, ok := matchFrom(src, enc, w[0], w[1], seen); ok {
			return 0, true
		}
	}
	return i, false
}

// nullWindows returns the (src, enc) offsets to resume at for each way the
// difference at (i, j) can be a nullable length that was negative in src
// and re-encoded as null:
//   - a fixed-width length (int16 for strings, int32 for bytes and arrays)
//     that starts at most width-1 bytes before the difference: enc holds
//     all 0xff there and src a negative number of the same width;
//   - a compact length: enc holds 0 (null) and src a varint whose value
//     minus one is negative as an int32 (0x80000001-0xffffffff).
func nullWindows(src, enc []byte, i, j int) [][2]int {
	var out [][2]int
	for _, width := range [...]int{4, 2} {
		for back := 0; back < width; back++ {
			s, e := i-back, j-back
			if s < 0 || e < 0 || e+width > len(enc) || s+width > len(src) {
				continue
			}
			if allFF(enc[e:e+width]) && src[s]&0x80 != 0 {
				out = append(out, [2]int{s + width, e + width})
			}
		}
	}
	if enc[j] == 0 {
		if u, n := uvarint32(src[i:]); n > 0 && u > 0x80000000 {
			out = append(out, [2]int{i + n, j + 1})
		}
	}
	return out
}

func allFF(b []byte) bool {
	for _, c := range b {
		if c != 0xff {
			return false
		}
	}
	return true
}

// uvarint32 decodes an unsigned varint of at most five bytes, as Kafka's
// readUnsignedVarint does; n is 0 when b does not start with one.
func uvarint32(b []byte) (uint32, int) {
	var v uint32
	for n := 0; n < 5 && n < len(b); n++ {
		v |= uint32(b[n]&0x7f) << (7 * n)
		if b[n] < 0x80 {
			return v, n + 1
		}
	}
	return 0, 0
}
