package broker

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/storage"
)

// Zero-copy Fetch (Kafka's FileRecords: the records of a Fetch response go
// from the segment file to the socket with sendfile, never through user
// space).
//
// A partition read for the response gets its records as a storage.Region
// instead of bytes, and its RecordBatches holds a one-byte placeholder that
// stands for the region (fetchRegions maps the placeholder's address to
// it). Everything else of the response is built, filtered by the fetch
// session and encoded by kmsg as usual. splicedFetch then walks that
// encoding, field by field as Fetch v4-v16 lays it out, to each
// placeholder's records field, and replaces the placeholder with the real
// length prefix (int32, or a compact uvarint length+1 from v12) and the
// region, which the protocol server sends from the file (protocol.Splice).
// The bytes on the wire are exactly kmsg's encoding of the response with
// the records read into memory.
//
// Nothing in Fetch v4-v16 prevents it: kraftd serves no message format
// below v2, so there is no down-conversion (Kafka's copy path); records go
// out as stored for read_committed too (the consumer drops aborted
// transactions itself, from AbortedTransactions); the KIP-74 first batch
// above the byte limits is one more byte of region; fetch sessions cache
// partition state, not response bytes. What still copies: the
// __cluster_metadata Fetch on the controller listener (quorum's raftlog),
// the internal coordinators' own reads, connections the protocol server
// cannot sendfile to (copied there), and ClientAPI.copyRecords (tests and
// benchmarks).

// fetchRegions holds the regions a Fetch read, by placeholder.
type fetchRegions map[*byte]storage.Region

// add records r and returns its placeholder; an empty r needs none.
func (rs fetchRegions) add(r storage.Region) []byte {
	ph := make([]byte, 1) // its own allocation: the address names r
	rs[&ph[0]] = r
	return ph
}

// regionOf is the region rp's RecordBatches stands for.
func (rs fetchRegions) regionOf(rp *kmsg.FetchResponseTopicPartition) (storage.Region, bool) {
	if len(rp.RecordBatches) != 1 {
		return storage.Region{}, false
	}
	r, ok := rs[&rp.RecordBatches[0]]
	return r, ok
}

// drop releases r and forgets it (a read left out of the response).
func (rs fetchRegions) drop(ph []byte) {
	if len(ph) == 1 {
		if r, ok := rs[&ph[0]]; ok {
			r.Release()
			delete(rs, &ph[0])
		}
	}
}

func (rs fetchRegions) releaseAll() {
	for k, r := range rs {
		r.Release()
		delete(rs, k)
	}
}

// splicedFetch is a Fetch response whose records are sent from segment
// files: body is the encoded response without them, splices where they go.
//
// INVARIANTS: every region in splices is held (released by Release, once);
// the FetchResponse's placeholders stand for exactly those regions.
type splicedFetch struct {
	*kmsg.FetchResponse
	body    []byte
	splices []protocol.Splice
	regions fetchRegions
}

var _ protocol.SplicedResponse = (*splicedFetch)(nil)

// newSplicedFetch encodes resp and places the regions of rs. Regions no
// partition of resp stands for (a fetch session left their partition out)
// are released now. On error every region is released.
func newSplicedFetch(resp *kmsg.FetchResponse, rs fetchRegions) (*splicedFetch, error) {
	sf := &splicedFetch{FetchResponse: resp, regions: fetchRegions{}}
	enc := resp.AppendTo(nil)
	w := fetchWalker{r: kbin.Reader{Src: enc}, enc: enc, version: resp.Version, flexible: resp.IsFlexible()}
	err := w.walk(resp, func(rp *kmsg.FetchResponseTopicPartition, field, end int) error {
		r, ok := rs.regionOf(rp)
		if !ok {
			return nil
		}
		if end-field != w.prefixLen(1)+1 {
			return fmt.Errorf("broker: records placeholder of %d bytes", end-field)
		}
		sf.body = append(sf.body, enc[w.copied:field]...)
		sf.body = w.appendLen(sf.body, r.Len)
		sf.splices = append(sf.splices, protocol.Splice{At: len(sf.body), Region: r})
		sf.regions[&rp.RecordBatches[0]] = r
		delete(rs, &rp.RecordBatches[0])
		w.copied = end
		return nil
	})
	rs.releaseAll() // not in the response
	if err != nil {
		sf.regions.releaseAll()
		return nil, err
	}
	sf.body = append(sf.body, enc[w.copied:]...)
	return sf, nil
}

// AppendSpliced appends the encoded response without its records.
func (sf *splicedFetch) AppendSpliced(dst []byte) ([]byte, []protocol.Splice) {
	start := len(dst)
	out := make([]protocol.Splice, len(sf.splices))
	for i, sp := range sf.splices {
		out[i] = protocol.Splice{At: start + sp.At, Region: sp.Region}
	}
	return append(dst, sf.body...), out
}

// AppendTo encodes the response with its records read into memory: what
// AppendSpliced and the regions send, for any user of the plain encoding.
func (sf *splicedFetch) AppendTo(dst []byte) []byte {
	m, err := sf.materialize()
	if err != nil {
		panic(fmt.Sprintf("broker: spliced fetch response: %v", err)) // only tests encode it so
	}
	return m.AppendTo(dst)
}

// materialize is the response with every region read into RecordBatches.
func (sf *splicedFetch) materialize() (*kmsg.FetchResponse, error) {
	m := *sf.FetchResponse
	m.Topics = append([]kmsg.FetchResponseTopic(nil), m.Topics...)
	for i := range m.Topics {
		t := &m.Topics[i]
		t.Partitions = append([]kmsg.FetchResponseTopicPartition(nil), t.Partitions...)
		for j := range t.Partitions {
			rp := &t.Partitions[j]
			if r, ok := sf.regions.regionOf(rp); ok {
				b, err := r.Bytes()
				if err != nil {
					return nil, err
				}
				rp.RecordBatches = b
			}
		}
	}
	return &m, nil
}

// Release releases the regions.
func (sf *splicedFetch) Release() { sf.regions.releaseAll() }

// fetchWalker reads an encoded Fetch response (v4-v16) field by field.
type fetchWalker struct {
	r        kbin.Reader
	enc      []byte
	version  int16
	flexible bool
	copied   int // enc[:copied] is in the spliced body
}

func (w *fetchWalker) pos() int { return len(w.enc) - len(w.r.Src) }

// prefixLen is the size of a records length prefix for n bytes.
func (w *fetchWalker) prefixLen(n int64) int {
	if w.flexible {
		return len(kbin.AppendUvarint(nil, uint32(n+1)))
	}
	return 4
}

func (w *fetchWalker) appendLen(dst []byte, n int64) []byte {
	if w.flexible {
		return kbin.AppendUvarint(dst, uint32(n+1))
	}
	return kbin.AppendInt32(dst, int32(n))
}

func (w *fetchWalker) arrayLen() int32 {
	if w.flexible {
		return w.r.CompactArrayLen()
	}
	return w.r.ArrayLen()
}

func (w *fetchWalker) skipTags() {
	if w.flexible {
		kmsg.SkipTags(&w.r)
	}
}

// walk calls fn with each partition of resp and the span [field, end) of its
// records field (length prefix and bytes), checking that the encoding has
// resp's topics and partitions.
func (w *fetchWalker) walk(resp *kmsg.FetchResponse, fn func(rp *kmsg.FetchResponseTopicPartition, field, end int) error) error {
	if w.version < 4 || w.version > 16 {
		return fmt.Errorf("broker: spliced Fetch v%d", w.version)
	}
	w.r.Int32() // ThrottleMillis (v1+)
	if w.version >= 7 {
		w.r.Int16() // ErrorCode
		w.r.Int32() // SessionID
	}
	if n := w.arrayLen(); int(n) != len(resp.Topics) {
		return fmt.Errorf("broker: walking Fetch v%d: %d topics encoded, %d in the response", w.version, n, len(resp.Topics))
	}
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if w.version >= 13 {
			w.r.Span(16) // TopicID
		} else if w.flexible {
			_ = w.r.CompactString()
		} else {
			_ = w.r.String()
		}
		if n := w.arrayLen(); int(n) != len(t.Partitions) {
			return fmt.Errorf("broker: walking Fetch v%d: %d partitions encoded, %d in the response", w.version, n, len(t.Partitions))
		}
		for j := range t.Partitions {
			if err := w.partition(&t.Partitions[j], fn); err != nil {
				return err
			}
		}
		w.skipTags()
	}
	w.skipTags()
	if err := w.r.Complete(); err != nil || len(w.r.Src) != 0 {
		return fmt.Errorf("broker: walking Fetch v%d: %v, %d bytes left", w.version, err, len(w.r.Src))
	}
	return nil
}

func (w *fetchWalker) partition(rp *kmsg.FetchResponseTopicPartition, fn func(*kmsg.FetchResponseTopicPartition, int, int) error) error {
	w.r.Int32() // Partition
	w.r.Int16() // ErrorCode
	w.r.Int64() // HighWatermark
	w.r.Int64() // LastStableOffset (v4+)
	if w.version >= 5 {
		w.r.Int64() // LogStartOffset
	}
	aborted := w.arrayLen() // nullable: -1 is null
	for range max(aborted, 0) {
		w.r.Int64() // ProducerID
		w.r.Int64() // FirstOffset
		w.skipTags()
	}
	if w.version >= 11 {
		w.r.Int32() // PreferredReadReplica
	}
	field := w.pos()
	var n int
	if w.flexible {
		n = int(w.r.Uvarint()) - 1
	} else {
		n = int(w.r.Int32())
	}
	w.r.Span(max(n, 0))
	if err := w.r.Complete(); err != nil {
		return fmt.Errorf("broker: walking Fetch v%d: %w", w.version, err)
	}
	if err := fn(rp, field, w.pos()); err != nil {
		return err
	}
	w.skipTags()
	return nil
}
