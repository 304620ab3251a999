package protocol

import (
	"bytes"
	"context"
	"testing"
	"testing/iotest"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fuzzRegistry serves every key kmsg knows at every version kmsg knows, so
// that fuzzed frames reach every request decoder.
func fuzzRegistry() *Registry {
	reg := NewRegistry()
	nop := func(context.Context, *Request) (kmsg.Response, error) { return nil, nil }
	for key := int16(0); key < 200; key++ {
		if r := kmsg.RequestForKey(key); r != nil && key != apiVersionsKey {
			reg.Register(key, 0, r.MaxVersion(), nop)
		}
	}
	return reg
}

// FuzzFrame feeds arbitrary bytes through the server's connection-level
// decode path: frame reading, header parsing, registry lookup and body
// decoding. It must never panic, and whatever decodes must be consistent
// with the header it came from.
func FuzzFrame(f *testing.F) {
	formatter := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz"))
	for _, req := range []kmsg.Request{
		kmsg.NewPtrApiVersionsRequest(), metadataReq(9, "a"), metadataReq(1, "b"),
		kmsg.NewPtrFetchRequest(), kmsg.NewPtrVoteRequest(), kmsg.NewPtrProduceRequest(),
		kmsg.NewPtrBrokerRegistrationRequest(), kmsg.NewPtrCreateTopicsRequest(),
	} {
		for _, v := range []int16{0, req.MaxVersion()} {
			req.SetVersion(v)
			f.Add(formatter.AppendRequest(nil, req, 1)[4:])
		}
	}
	f.Add([]byte{0, 18, 0, 127, 0, 0, 0, 1, 0xff, 0xff, 0})
	reg := fuzzRegistry()
	f.Fuzz(func(t *testing.T, payload []byte) {
		req, h, err := decodeRequest(reg, payload)
		if err == nil {
			if h == nil || req.Body == nil || req.Body.Key() != req.Key {
				t.Fatalf("decoded %+v with handler %v", req, h != nil)
			}
			if req.Key != apiVersionsKey && req.Body.GetVersion() != req.Version {
				t.Fatalf("body version %d, header %d", req.Body.GetVersion(), req.Version)
			}
			_ = req.Body.AppendTo(nil) // re-encoding what we decoded must not panic either
		}
		framed := append(frameOf(payload), payload...)
		fr := frameReader{src: iotest.OneByteReader(bytes.NewReader(framed)), pool: &requestPool{capacity: 1 << 16}, ctx: context.Background()}
		got, err := fr.next(1 << 20)
		fr.releaseBody()
		fr.close()
		if used := fr.pool.usedBytes(); used != 0 {
			t.Fatalf("%d pool bytes still held after the frame was released", used)
		}
		if len(payload) > 0 && len(payload) <= 1<<20 && (err != nil || !bytes.Equal(got, payload)) {
			t.Fatalf("frameReader: %v", err)
		}
	})
}

// FuzzResponseDecode checks the client side: arbitrary response bytes for
// a request must fail cleanly, never panic.
func FuzzResponseDecode(f *testing.F) {
	f.Add(int16(3), int16(9), []byte{0, 0, 0, 0, 0})
	f.Add(int16(18), int16(3), []byte{0, 35, 1, 0})
	f.Fuzz(func(t *testing.T, key, version int16, body []byte) {
		req := kmsg.RequestForKey(key)
		if req == nil || version < 0 || version > req.MaxVersion() {
			return
		}
		req.SetVersion(version)
		_ = decodeResponse(req.ResponseKind(), body)
	})
}
