package quorum

import (
	"errors"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Errors returned by the core. Compare with errors.Is.
var (
	// ErrNotLeader: Propose on a node that is not the leader (or is resigning).
	ErrNotLeader = errors.New("quorum: not leader")
	// ErrBatchTooLarge: a proposal larger than Config.MaxBatchBytes.
	ErrBatchTooLarge = errors.New("quorum: record batch too large")
	// ErrInvalidConfig: Config.Validate rejected the configuration.
	ErrInvalidConfig = errors.New("quorum: invalid config")
	// ErrRequestFailed is what a driver may use as Message.Err for a failed outbound request.
	ErrRequestFailed = errors.New("quorum: request failed")
)

// errName is the Kafka name of an error code, for transcripts.
func errName(code int16) string {
	if e := kerr.TypedErrorForCode(code); e != nil && (e.Code == code) {
		return e.Message
	}
	return strconv.Itoa(int(code))
}
