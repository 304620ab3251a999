package protocol

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// apiVersionsKey is the one API whose framing has exceptions: its response
// header never carries tags, and an unsupported version is still answered.
const apiVersionsKey int16 = 18

// requestHeader is the non-flexible prefix shared by request header v1 and
// v2. Header v2 (flexible requests) adds a tag section after the client id.
type requestHeader struct {
	key           int16
	version       int16
	correlationID int32
	clientID      *string
}

// parseRequestHeader reads the fixed part of a request header. The client
// id is a non-compact nullable string even in header v2, because clients
// send ApiVersions before they know whether the peer understands compact
// strings.
func parseRequestHeader(r *kbin.Reader) (requestHeader, error) {
	var h requestHeader
	h.key = r.Int16()
	h.version = r.Int16()
	h.correlationID = r.Int32()
	h.clientID = r.NullableString()
	if !r.Ok() {
		return h, fmt.Errorf("%w: frame of %d bytes too short", ErrBadHeader, len(r.Src))
	}
	return h, nil
}

// decodeRequest turns one frame into a Request using reg to decide what the
// listener accepts. It never panics: a decoder panic on hostile input is
// converted into ErrBadBody.
//
// Policy (mirrors Kafka's SocketServer / RequestContext):
//   - unknown key, key not registered, or version outside the registered
//     range: error (the caller closes the connection);
//   - ApiVersions at a version outside its range: NOT an error; the body is
//     left unparsed and Request.Body is a v0 ApiVersionsRequest, so the
//     handler can answer with the KIP-511 fallback;
//   - a body kmsg reads leniently (a negative count on a non-nullable
//     array, see checkStrict) is an error, as in Kafka's generated readers;
//   - trailing bytes after a complete body are tolerated, as kmsg and
//     Kafka's generated readers both tolerate them (newer clients may add
//     fields an older server does not read).
func decodeRequest(reg *Registry, frame []byte) (req *Request, h Handler, err error) {
	defer func() {
		if p := recover(); p != nil {
			req, h, err = nil, nil, fmt.Errorf("%w: decoder panic: %v", ErrBadBody, p)
		}
	}()
	r := kbin.Reader{Src: frame}
	hdr, err := parseRequestHeader(&r)
	if err != nil {
		return nil, nil, err
	}
	body := kmsg.RequestForKey(hdr.key)
	minV, maxV, handler, ok := reg.Lookup(hdr.key)
	if body == nil || !ok {
		return nil, nil, fmt.Errorf("%w: key %d (%s)", ErrUnknownKey, hdr.key, kmsg.NameForKey(hdr.key))
	}
	req = &Request{
		Key:           hdr.key,
		Version:       hdr.version,
		CorrelationID: hdr.correlationID,
		ClientID:      hdr.clientID,
		Body:          body,
	}
	if hdr.version < minV || hdr.version > maxV {
		if hdr.key == apiVersionsKey {
			body.SetVersion(0) // KIP-511: answer without parsing the body.
			return req, handler, nil
		}
		return nil, nil, fmt.Errorf("%w: %s v%d (listener serves v%d-v%d)",
			ErrUnsupportedVersion, kmsg.NameForKey(hdr.key), hdr.version, minV, maxV)
	}
	body.SetVersion(hdr.version)
	if body.IsFlexible() {
		kmsg.SkipTags(&r)
		if !r.Ok() {
			return nil, nil, fmt.Errorf("%w: bad header tags", ErrBadHeader)
		}
	}
	if err := body.ReadFrom(r.Src); err != nil {
		return nil, nil, fmt.Errorf("%w: %s v%d: %v", ErrBadBody, kmsg.NameForKey(hdr.key), hdr.version, err)
	}
	if err := checkStrict(body, r.Src); err != nil {
		return nil, nil, fmt.Errorf("%w: %s v%d: %v", ErrBadBody, kmsg.NameForKey(hdr.key), hdr.version, err)
	}
	return req, handler, nil
}

// appendResponse appends a complete response frame to dst: size, header
// (v0, or v1 with an empty tag section for flexible responses) and body.
// ApiVersions responses always use header v0 so that a client that sent a
// version we do not know can still parse the answer (KIP-511).
func appendResponse(dst []byte, correlationID int32, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = kbin.AppendInt32(dst, correlationID)
	if resp.IsFlexible() && resp.Key() != apiVersionsKey {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}
