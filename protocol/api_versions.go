package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ApiVersions: v0-v5 (built into every Registry).
//
// Behaviour, as Kafka's KafkaApis / ApiVersionsRequest:
//   - a version outside the registered range is answered, not refused:
//     a v0 body with UNSUPPORTED_VERSION (35) listing only ApiVersions'
//     own range, so the client can retry at that max (KIP-511). The body
//     was never parsed (see decodeRequest) and the header is v0, as it is
//     for every ApiVersions response;
//   - v3+: ClientSoftwareName and ClientSoftwareVersion must match
//     [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])? else INVALID_REQUEST (42);
//   - v5: ClusterID and NodeID are sent both or neither, else
//     INVALID_REQUEST (KIP-1242). Whether they name *us* is up to the hook;
//   - ThrottleMillis is always 0.
func (r *Registry) handleApiVersions(_ context.Context, req *Request) (kmsg.Response, error) {
	body := req.Body.(*kmsg.ApiVersionsRequest)
	resp := body.ResponseKind().(*kmsg.ApiVersionsResponse)
	minV, maxV, _, _ := r.Lookup(apiVersionsKey)
	if req.Version < minV || req.Version > maxV {
		resp.SetVersion(0)
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		key := kmsg.NewApiVersionsResponseApiKey()
		key.ApiKey, key.MinVersion, key.MaxVersion = apiVersionsKey, minV, maxV
		resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{key}
		return resp, nil
	}
	if req.Version >= 3 && (!validSoftwareString(body.ClientSoftwareName) ||
		!validSoftwareString(body.ClientSoftwareVersion)) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil
	}
	if req.Version >= 5 && (body.ClusterID != nil) != (body.NodeID != -1) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil
	}
	resp.ApiKeys = r.Versions()
	if hook := r.hook.Load(); hook != nil {
		(*hook)(req, resp)
	}
	return resp, nil
}

// validSoftwareString reports whether s matches Kafka's client software
// name/version pattern: alphanumeric at both ends, '-' and '.' allowed
// inside, non-empty.
func validSoftwareString(s string) bool {
	if s == "" || !isAlnum(s[0]) || !isAlnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; !isAlnum(c) && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
