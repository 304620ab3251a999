package image

import "errors"

// Sentinel errors returned (wrapped with the record type and offset) by
// Delta.Replay. Every one of them means the log holds a record that cannot
// follow the records before it; the caller should treat it as fatal, as
// Kafka's loaders do, rather than skip the record.
var (
	// ErrOffsetOrder means a record's offset is not above the last one
	// replayed: the caller fed the log out of order or twice.
	ErrOffsetOrder = errors.New("image: record offset out of order")
	// ErrUnknownTopic means a record names a topic id that does not exist.
	ErrUnknownTopic = errors.New("image: unknown topic")
	// ErrUnknownPartition means a PartitionChangeRecord names a partition
	// that does not exist.
	ErrUnknownPartition = errors.New("image: unknown partition")
	// ErrDuplicateTopic means a TopicRecord reuses a live topic's id or name.
	ErrDuplicateTopic = errors.New("image: duplicate topic")
	// ErrUnknownBroker means a record changes a broker that is not registered.
	ErrUnknownBroker = errors.New("image: unknown broker")
	// ErrBrokerEpoch means a record's broker epoch differs from the
	// registered one.
	ErrBrokerEpoch = errors.New("image: broker epoch mismatch")
	// ErrInvalidRecord means a field holds a value the record's schema does
	// not allow (an unknown fence change, mismatched directories, ...).
	ErrInvalidRecord = errors.New("image: invalid record")
	// ErrUnsupportedRecord means the record type is not modelled by images.
	ErrUnsupportedRecord = errors.New("image: unsupported record type")
	// ErrUnknownMetadataVersion means a metadata.version name that Kafka's
	// MetadataVersion does not define up to 3.9-IV0 (ParseMetadataVersion).
	ErrUnknownMetadataVersion = errors.New("image: unknown metadata.version")
	// ErrDeltaApplied means Replay was called after Apply.
	ErrDeltaApplied = errors.New("image: delta already applied")
)
