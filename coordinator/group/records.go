package group

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/storage"
)

// The record versions Kafka 3.x writes to __consumer_offsets
// (GroupMetadataManager / GroupCoordinatorRecordHelpers): keys OffsetCommitKey
// v1 and GroupMetadataKey v2 (the key's version tells the two apart), values
// OffsetCommitValue v3 (leader epoch, no expire timestamp) and
// GroupMetadataValue v3 (members with their group.instance.id). A tombstone
// (null value) deletes the key.
const (
	offsetKeyVersion  = 1
	groupKeyVersion   = 2
	offsetValVersion  = 3
	groupValVersion   = 3
	maxGroupValReaded = 4
)

var errBadRecord = errors.New("group: unreadable __consumer_offsets record")

// offsetCommitRecord is the record of one committed offset (nil value: a
// tombstone).
func offsetCommitRecord(groupID string, tp TopicPartition, o *committedOffset) storage.Record {
	k := kmsg.OffsetCommitKey{Version: offsetKeyVersion, Group: groupID, Topic: tp.Topic, Partition: tp.Partition}
	rec := storage.Record{Key: k.AppendTo(nil)}
	if o != nil {
		v := kmsg.NewOffsetCommitValue()
		v.Version, v.Offset, v.LeaderEpoch = offsetValVersion, o.offset, o.leaderEpoch
		v.Metadata, v.CommitTimestamp = o.metadata, o.commitMs
		rec.Value = v.AppendTo(nil)
	}
	return rec
}

// groupMetadataRecord is the record of g's membership and assignment, as
// Kafka writes it when a rebalance completes or the group empties.
func groupMetadataRecord(g *group) storage.Record {
	k := kmsg.GroupMetadataKey{Version: groupKeyVersion, Group: g.id}
	v := kmsg.NewGroupMetadataValue()
	v.Version, v.ProtocolType, v.Generation = groupValVersion, g.protocolType, g.generation
	if g.protocol != "" {
		v.Protocol = new(string)
		*v.Protocol = g.protocol
	}
	if g.leader != "" {
		v.Leader = new(string)
		*v.Leader = g.leader
	}
	v.CurrentStateTimestamp = g.stateSinceMs
	for _, id := range g.memberIDs() {
		m := g.members[id]
		vm := kmsg.NewGroupMetadataValueMember()
		vm.MemberID, vm.InstanceID, vm.ClientID, vm.ClientHost = m.id, m.instanceID, m.clientID, m.clientHost
		vm.RebalanceTimeoutMillis, vm.SessionTimeoutMillis = m.rebalanceTimeoutMs, m.sessionTimeoutMs
		vm.Subscription, vm.Assignment = m.metadataFor(g.protocol), m.assignment
		if vm.Subscription == nil {
			vm.Subscription = []byte{}
		}
		if vm.Assignment == nil {
			vm.Assignment = []byte{}
		}
		v.Members = append(v.Members, vm)
	}
	return storage.Record{Key: k.AppendTo(nil), Value: v.AppendTo(nil)}
}

// groupTombstone deletes a group's metadata record.
func groupTombstone(groupID string) storage.Record {
	k := kmsg.GroupMetadataKey{Version: groupKeyVersion, Group: groupID}
	return storage.Record{Key: k.AppendTo(nil)}
}

// loadedRecord is one decoded __consumer_offsets record: exactly one of
// offsetKey and groupKey is set; a nil value is a tombstone.
type loadedRecord struct {
	offsetKey   *kmsg.OffsetCommitKey
	offsetValue *kmsg.OffsetCommitValue
	groupKey    *kmsg.GroupMetadataKey
	groupValue  *kmsg.GroupMetadataValue
	logOffset   int64 // the record's offset in __consumer_offsets
}

// decodeRecord reads one record of __consumer_offsets. Versions beyond
// those Kafka 3.x reads are refused rather than guessed at.
func decodeRecord(r storage.Record) (loadedRecord, error) {
	if len(r.Key) < 2 {
		return loadedRecord{}, fmt.Errorf("%w: key of %d bytes", errBadRecord, len(r.Key))
	}
	var out loadedRecord
	switch kv := int16(binary.BigEndian.Uint16(r.Key)); kv {
	case 0, 1:
		out.offsetKey = new(kmsg.OffsetCommitKey)
		if err := out.offsetKey.ReadFrom(r.Key); err != nil {
			return out, fmt.Errorf("%w: offset key: %w", errBadRecord, err)
		}
		if r.Value != nil {
			out.offsetValue = new(kmsg.OffsetCommitValue)
			if err := out.offsetValue.ReadFrom(r.Value); err != nil || out.offsetValue.Version > 4 {
				return out, fmt.Errorf("%w: offset value (version %d): %v", errBadRecord, out.offsetValue.Version, err)
			}
		}
	case 2:
		out.groupKey = new(kmsg.GroupMetadataKey)
		if err := out.groupKey.ReadFrom(r.Key); err != nil {
			return out, fmt.Errorf("%w: group key: %w", errBadRecord, err)
		}
		if r.Value != nil {
			out.groupValue = new(kmsg.GroupMetadataValue)
			if err := out.groupValue.ReadFrom(r.Value); err != nil || out.groupValue.Version > maxGroupValReaded {
				return out, fmt.Errorf("%w: group value (version %d): %v", errBadRecord, out.groupValue.Version, err)
			}
			if err := checkGroupValue(out.groupValue); err != nil {
				return out, err
			}
		}
	default:
		return out, fmt.Errorf("%w: key version %d", errBadRecord, kv)
	}
	return out, nil
}

// checkGroupValue refuses group metadata no coordinator writes: a negative
// generation, members without an id or twice, a non-positive session
// timeout. Loading it would make the group's checks meaningless.
func checkGroupValue(v *kmsg.GroupMetadataValue) error {
	if v.Generation < 0 {
		return fmt.Errorf("%w: group generation %d", errBadRecord, v.Generation)
	}
	seen := map[string]bool{}
	for _, m := range v.Members {
		if m.MemberID == "" || seen[m.MemberID] || m.SessionTimeoutMillis <= 0 {
			return fmt.Errorf("%w: member %q (session timeout %d ms)", errBadRecord, m.MemberID, m.SessionTimeoutMillis)
		}
		seen[m.MemberID] = true
	}
	return nil
}
