package broker

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/kraftd/kraftd/protocol"
)

// defaultForwardTimeoutMs bounds forwarding of requests that carry no
// timeout of their own (DescribeQuorum): Kafka's request.timeout.ms.
const defaultForwardTimeoutMs = 30000

// forwardMarginMs lets the controller answer a request at its own timeout
// before the broker gives up on it: the controller's answer (which may say
// the topic was created after all) is better than our REQUEST_TIMED_OUT.
const forwardMarginMs = 500

// forwarded describes how one forwardable API reports errors.
type forwarded struct {
	// notController reports whether the controller refused the request
	// because it is not the active one.
	notController func(kmsg.Response) bool
	// failure builds the client's answer when forwarding failed.
	failure func(code int16, msg string) kmsg.Response
}

// forward sends body (a request received from a client) to the active
// controller as the same request, retrying on NOT_CONTROLLER within
// timeoutMs (KIP-590 without the Envelope: kraftd brokers forward the
// request itself, since there is no principal to carry). Errors become the
// API's own error codes: REQUEST_TIMED_OUT when the time ran out,
// UNSUPPORTED_VERSION when no controller version fits. A Go error (closing
// the connection) is returned only when the client's connection is gone.
func (b *Broker) forward(ctx context.Context, body kmsg.Request, timeoutMs int32, f forwarded) (kmsg.Response, error) {
	clientVersion := body.GetVersion()
	if timeoutMs <= 0 {
		timeoutMs = 0
	}
	fctx, cancel := context.WithTimeout(ctx, time.Duration(timeoutMs+forwardMarginMs)*time.Millisecond)
	defer cancel()
	resp, err := b.ch.forward(fctx, body, f.notController)
	body.SetVersion(clientVersion)
	switch {
	case err == nil:
		return resp, nil
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.Is(err, protocol.ErrUnsupportedVersion):
		return f.failure(kerr.UnsupportedVersion.Code, err.Error()), nil
	}
	b.log.Debug("forwarding to the controller timed out", zap.Int16("key", body.Key()), zap.Error(err))
	return f.failure(kerr.RequestTimedOut.Code, "timed out waiting for the active controller"), nil
}

// forwardedApis are the keys whose advertised max is capped by the
// controller's (ApiVersionsResponse.controllerApiVersions).
var forwardedApis = []int16{19, 20, 33, 37, 43, 44, 55, 57, 80, 81}
