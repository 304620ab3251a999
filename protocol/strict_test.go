package protocol

import (
	"context"
	"encoding/binary"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// createTopicsV0 builds a CreateTopics v0 body: the topics count, then the
// given topic bytes, then the timeout.
func createTopicsV0(count int32, topics ...byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(count))
	b = append(b, topics...)
	return binary.BigEndian.AppendUint32(b, 1000)
}

// oneTopicV0 is one CreateTopics v0 topic "t" with one config whose name is
// "c" and whose nullable value has the length prefix valueLen.
func oneTopicV0(valueLen int16) []byte {
	b := []byte{0, 1, 't', 0, 0, 0, 1, 0, 1}                  // name, partitions 1, rf 1
	b = append(b, 0, 0, 0, 0)                                 // no assignment
	b = append(b, 0, 0, 0, 1, 0, 1, 'c')                      // 1 config named "c"
	return binary.BigEndian.AppendUint16(b, uint16(valueLen)) // its value
}

// TestStrictLengths sends hand-built frames over a real connection. Kafka's
// generated readers reject a negative length on a non-nullable field and a
// length past the end of the frame, and read any negative length on a
// nullable field as null; kmsg alone would answer the first with an empty
// request.
func TestStrictLengths(t *testing.T) {
	decoded := make(chan *kmsg.CreateTopicsRequest, 8)
	s := startTestServer(t, func(_ *ServerConfig, reg *Registry) {
		reg.Register(19, 0, 7, func(_ context.Context, req *Request) (kmsg.Response, error) {
			decoded <- req.Body.(*kmsg.CreateTopicsRequest)
			return req.Body.ResponseKind(), nil
		})
	})
	good := dialRaw(t, s.addr)
	nullableArrayNeg := append(rawHeader(3, 1, 1), 0xff, 0xff, 0xff, 0xfb) // Metadata v1 topics -5: null, all topics
	bad := []struct {
		name string
		body []byte
	}{
		{"non-nullable array count -2", append(rawHeader(19, 0, 1), createTopicsV0(-2)...)},
		{"non-nullable array count -1", append(rawHeader(19, 0, 1), createTopicsV0(-1)...)},
		{"string length past the end", append(rawHeader(19, 0, 1), createTopicsV0(1, 0, 40, 't')...)},
		{"non-nullable string length -2", append(rawHeader(19, 0, 1), createTopicsV0(1, 0xff, 0xfe)...)},
		{"nullable string length past the end", append(rawHeader(19, 0, 1), createTopicsV0(1, oneTopicV0(200)...)...)},
	}
	for i, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			before := countLogs(s.logs, "bad request")
			c := dialRaw(t, s.addr)
			c.write(withFrame(tc.body))
			c.expectClosed()
			waitFor(t, "log line", func() bool { return countLogs(s.logs, "bad request") == before+1 })
			checkEcho(t, good.roundTrip(metadataReq(9, "ok"), int32(i)), "ok")
		})
	}
	if len(decoded) != 0 {
		t.Fatalf("%d malformed CreateTopics reached the handler", len(decoded))
	}

	t.Run("nullable string length -5 is null", func(t *testing.T) {
		c := dialRaw(t, s.addr)
		c.write(withFrame(append(rawHeader(19, 0, 7), createTopicsV0(1, oneTopicV0(-5)...)...)))
		c.recv(kmsg.NewPtrCreateTopicsRequest(), 7)
		req := <-decoded
		if len(req.Topics) != 1 || req.Topics[0].Topic != "t" || len(req.Topics[0].Configs) != 1 ||
			req.Topics[0].Configs[0].Name != "c" || req.Topics[0].Configs[0].Value != nil {
			t.Fatalf("decoded %+v, want topic t with config c = null", req.Topics)
		}
	})
	t.Run("nullable array count -5 is null", func(t *testing.T) {
		c := dialRaw(t, s.addr)
		c.write(withFrame(nullableArrayNeg))
		resp := c.recv(metadataReq(1), 1).(*kmsg.MetadataResponse)
		if len(resp.Topics) != 0 {
			t.Fatalf("topics %+v, want none echoed for a null list", resp.Topics)
		}
	})
}

// TestStrictAcceptsWhatKmsgWrites: every request kmsg can write, at every
// version, passes the strict check, with its default field values and with
// one element in each top-level array, so that the check refuses only what
// a real client cannot have sent.
func TestStrictAcceptsWhatKmsgWrites(t *testing.T) {
	reg := fuzzRegistry()
	formatter := kmsg.NewRequestFormatter(kmsg.FormatterClientID("strict"))
	checked := 0
	for key := int16(0); key < 200; key++ {
		req := kmsg.RequestForKey(key)
		if req == nil || key == apiVersionsKey {
			continue
		}
		for v := int16(0); v <= req.MaxVersion(); v++ {
			if key == 7 && v == 0 {
				continue // ControlledShutdown v0 has header v0, which no listener serves
			}
			for _, populate := range []bool{false, true} {
				req := kmsg.RequestForKey(key)
				req.SetVersion(v)
				if populate {
					addOneOfEach(reflect.ValueOf(req).Elem())
				}
				frame := formatter.AppendRequest(nil, req, 1)
				if _, _, err := decodeRequest(reg, frame[4:]); err != nil {
					t.Errorf("%s v%d (populated %v) as kmsg writes it: %v", kmsg.NameForKey(key), v, populate, err)
				}
				checked++
			}
		}
	}
	if checked < 700 {
		t.Fatalf("checked only %d key/version pairs", checked)
	}
}

// addOneOfEach appends one defaulted element to every slice of structs in
// v, recursively, and points every nil *string at a value, so nested
// lengths and nullable fields are exercised.
func addOneOfEach(v reflect.Value) {
	for i := range v.NumField() {
		f := v.Field(i)
		if !f.CanSet() {
			continue
		}
		switch {
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Struct:
			elem := reflect.New(f.Type().Elem())
			if d, ok := elem.Interface().(interface{ Default() }); ok {
				d.Default()
			}
			addOneOfEach(elem.Elem())
			f.Set(reflect.Append(f, elem.Elem()))
		case f.Kind() == reflect.Pointer && f.Type().Elem().Kind() == reflect.String && f.IsNil():
			s := "x"
			f.Set(reflect.ValueOf(&s))
		}
	}
}
