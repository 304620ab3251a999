package app

import "errors"

// Sentinel errors. Callers match them with errors.Is; the wrapped message
// names the offending key, directory or value.
var (
	// ErrUnknownKey is a configuration key kraftd does not know.
	ErrUnknownKey = errors.New("config: unknown key")
	// ErrBadValue is a value that does not parse or is out of range.
	ErrBadValue = errors.New("config: bad value")
	// ErrInvalidConfig is a combination of settings that cannot work.
	ErrInvalidConfig = errors.New("config: invalid configuration")
	// ErrPropertiesSyntax is a malformed .properties file.
	ErrPropertiesSyntax = errors.New("config: properties syntax error")
	// ErrBadUUID is text that is not a base64-encoded 16-byte UUID.
	ErrBadUUID = errors.New("app: invalid uuid")
	// ErrNotFormatted is a log directory without meta.properties.
	ErrNotFormatted = errors.New("storage: log directory is not formatted")
	// ErrAlreadyFormatted is a format request for a formatted directory.
	ErrAlreadyFormatted = errors.New("storage: log directory is already formatted")
	// ErrClusterIDMismatch is a directory formatted for another cluster.
	ErrClusterIDMismatch = errors.New("storage: cluster id mismatch")
	// ErrNodeIDMismatch is a directory formatted for another node.
	ErrNodeIDMismatch = errors.New("storage: node id mismatch")
	// ErrBadMetaProperties is an unreadable or incomplete meta.properties.
	ErrBadMetaProperties = errors.New("storage: invalid meta.properties")
	// ErrAppState is a lifecycle call in the wrong order (Start twice...).
	ErrAppState = errors.New("app: invalid lifecycle state")
)
