package protocol

import "errors"

// Sentinel errors. Callers match them with errors.Is; the returned errors
// usually wrap them with detail (key, version, address).
var (
	// ErrClosed is returned by a Server or Client that has been closed,
	// and fails every request still pending when Close is called.
	ErrClosed = errors.New("protocol: closed")

	// ErrUnsupportedVersion means the peer does not advertise the request
	// key at all, or not at a version both sides can speak.
	ErrUnsupportedVersion = errors.New("protocol: unsupported version")

	// ErrConnClosed fails requests that were in flight on a client
	// connection that died (EOF, reset, protocol violation by the peer).
	ErrConnClosed = errors.New("protocol: connection closed")

	// ErrBackingOff fails a request to a peer whose last dial failed, while
	// its reconnect backoff runs (ClientConfig.FailWhileBackingOff).
	ErrBackingOff = errors.New("protocol: peer unreachable, backing off before the next dial")

	// ErrFrameSize is a frame whose size prefix is zero, negative or above
	// the configured maximum.
	ErrFrameSize = errors.New("protocol: invalid frame size")

	// ErrBadHeader is a request or response header that does not parse.
	ErrBadHeader = errors.New("protocol: malformed header")

	// ErrBadBody is a request or response body that kmsg cannot decode.
	ErrBadBody = errors.New("protocol: malformed body")

	// ErrUnknownKey is a request key that kmsg does not know or that is
	// not registered on the listener the request arrived on.
	ErrUnknownKey = errors.New("protocol: api key not enabled on listener")

	// ErrCorrelation is a response whose correlation id does not belong to
	// any request in flight on that connection.
	ErrCorrelation = errors.New("protocol: correlation id mismatch")

	// ErrBadConfig is a ServerConfig that cannot be served.
	ErrBadConfig = errors.New("protocol: invalid config")
)
