package records

import "errors"

// Sentinel errors. Callers match them with errors.Is; the returned errors wrap
// them with the record type, version or field that failed.
var (
	// ErrUnknownType means the frame names a record type (apiKey) this package
	// does not know.
	ErrUnknownType = errors.New("records: unknown record type")
	// ErrUnsupportedVersion means the record version is outside the schema's
	// validVersions.
	ErrUnsupportedVersion = errors.New("records: unsupported version")
	// ErrFrameVersion means the ApiMessageAndVersion frame version is not 1.
	ErrFrameVersion = errors.New("records: unsupported frame version")
	// ErrTruncated means the input ended in the middle of a field.
	ErrTruncated = errors.New("records: truncated input")
	// ErrTrailingBytes means bytes were left over after a complete message.
	ErrTrailingBytes = errors.New("records: trailing bytes after message")
	// ErrMalformed means a length, varint or null marker is impossible for
	// the field being read.
	ErrMalformed = errors.New("records: malformed input")
	// ErrFieldNotInVersion means a field holds a non-default value but does
	// not exist at the version being encoded (Kafka throws
	// UnsupportedVersionException in the same case).
	ErrFieldNotInVersion = errors.New("records: field not supported at this version")
	// ErrStringTooLong means a string exceeds Kafka's 32767-byte limit,
	// which Kafka's readers reject; the encoder refuses it, as Kafka's does.
	ErrStringTooLong = errors.New("records: string too long")
	// ErrNilMessage means a Record has no Message to encode.
	ErrNilMessage = errors.New("records: nil message")
)
