package storage

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// PartitionMetadataFile holds the topic id of a partition directory (KIP-516), so a
// log left behind by a deleted topic is not mistaken for a recreated topic of the
// same name.
const PartitionMetadataFile = "partition.metadata"

// ErrCorruptPartitionMetadata is returned by DecodePartitionMetadata.
var ErrCorruptPartitionMetadata = errors.New("storage: corrupt partition.metadata")

// EncodePartitionMetadata renders Kafka's PartitionMetadataFile as its
// PartitionMetadataFileFormatter writes it: "version: 0\ntopic_id: <id>" with
// no final newline, the id as Kafka's Uuid.toString prints it (URL-safe base64
// without padding).
func EncodePartitionMetadata(topicID [16]byte) []byte {
	return []byte("version: 0\ntopic_id: " + base64.RawURLEncoding.EncodeToString(topicID[:]))
}

// DecodePartitionMetadata parses a partition.metadata file (version 0 only).
func DecodePartitionMetadata(data []byte) ([16]byte, error) {
	var id [16]byte
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) != 2 {
		return id, fmt.Errorf("%w: %d lines", ErrCorruptPartitionMetadata, len(lines))
	}
	version, ok1 := strings.CutPrefix(lines[0], "version: ")
	encoded, ok2 := strings.CutPrefix(lines[1], "topic_id: ")
	if !ok1 || !ok2 || strings.TrimSpace(version) != "0" {
		return id, fmt.Errorf("%w: %q", ErrCorruptPartitionMetadata, data)
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimSpace(encoded))
	if err != nil || len(raw) != 16 {
		return id, fmt.Errorf("%w: topic id %q", ErrCorruptPartitionMetadata, encoded)
	}
	copy(id[:], raw)
	return id, nil
}
