// Package records encodes and decodes the records that a KRaft cluster writes
// into the __cluster_metadata log, byte for byte as Apache Kafka does.
//
// Two families live here:
//
//   - Metadata records (TopicRecord, PartitionRecord, RegisterBrokerRecord, ...).
//     Each is stored as the value of a log record, wrapped in Kafka's
//     ApiMessageAndVersion frame: uvarint frame version (always 1), uvarint
//     record type (the schema's apiKey), uvarint record version, then the body.
//     [Record] is that frame; [Decode] reverses it.
//   - Control record values (LeaderChangeMessage, SnapshotHeaderRecord, ...).
//     They have no frame: the value is the flexible body itself, whose first
//     field is the message's own int16 Version. The control record key (int16
//     key version 0, int16 type) is handled by [EncodeControlKey] and
//     [DecodeControlKey].
//
// Every body uses Kafka's flexible encoding (all these schemas are flexible
// from version 0): compact strings and arrays carry uvarint(len+1), UUIDs are
// 16 raw bytes, and every struct ends with a tagged-field section.
//
// Versions. Each message type encodes and decodes every version in its
// schema's validVersions. As in Kafka's generated code, encoding a field that
// does not exist at the chosen version is only allowed while the field holds
// its default value; otherwise AppendTo fails with [ErrFieldNotInVersion].
// Fields absent at the decoded version take their schema default, so New and
// ReadFrom both start from Default().
//
// Unknown tagged fields. Kafka's generated classes keep unknown tags in
// _unknownTaggedFields and write them back. This package skips them when
// decoding and never writes them: the records we decode are only replayed,
// never re-emitted byte for byte, and dropping them keeps every struct a plain
// comparable value. As in Kafka, a tag the schema defines only for other
// versions is an error. A known tag whose payload is longer or shorter than
// its field is also an error, which is stricter than Kafka.
//
// Strings longer than Kafka's 32767-byte limit are refused when encoding
// (ErrStringTooLong) and when decoding (ErrMalformed), as Kafka does.
//
// The package is a pure codec: it has no goroutines, no global mutable state
// and imports nothing from the rest of kraftd.
package records
