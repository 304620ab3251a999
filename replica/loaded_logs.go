package replica

import (
	"slices"
	"strings"
)

// LoadedLog is a partition log that LoadLogs opened and no Apply adopted
// yet: a ZooKeeper-era broker's log before the controller's LeaderAndIsr
// names it, or one of a partition the broker no longer holds. Kafka's
// LogManager holds such a log like any other (DescribeLogDirs lists it).
type LoadedLog struct {
	TopicPartition
	Size int64 // bytes, as Log.Size
}

// Loaded lists the logs LoadLogs opened that no partition hosts, sorted by
// topic, then partition.
func (m *Manager) Loaded() []LoadedLog {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]LoadedLog, 0, len(m.loadedLogs))
	for tp, l := range m.loadedLogs {
		out = append(out, LoadedLog{TopicPartition: tp, Size: l.Size()})
	}
	slices.SortFunc(out, func(a, b LoadedLog) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	return out
}
