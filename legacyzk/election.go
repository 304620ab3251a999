package legacyzk

import "slices"

// TopicPartition names a partition by topic name, as ZooKeeper-era Kafka
// does (topic ids only ride along since 2.8).
type TopicPartition struct {
	Topic     string
	Partition int32
}

// electionResult is a new partition state decided by a pure election; the
// caller turns it into a fenced conditional write.
type electionResult struct {
	state LeaderIsr
	ok    bool // false: no eligible leader, the state keeps leader -1
}

// electOffline is the offline-partition election
// (PartitionLeaderElectionAlgorithms.offlinePartitionLeaderElection,
// clean only): the first replica in assignment order that is alive and in
// the ISR leads; the ISR keeps its live members. With no eligible replica
// the leader becomes -1 and, as KAFKA-5083 decided, the ISR is left as is
// so the last in-sync replica stays known.
func electOffline(replicas []int32, cur LeaderIsr, alive func(int32) bool, controllerEpoch int32) electionResult {
	next := LeaderIsr{LeaderEpoch: cur.LeaderEpoch + 1, ControllerEpoch: controllerEpoch,
		ZkVersion: cur.ZkVersion, Leader: -1}
	for _, r := range replicas {
		if alive(r) && slices.Contains(cur.ISR, r) {
			next.Leader = r
			break
		}
	}
	if next.Leader < 0 {
		next.ISR = slices.Clone(cur.ISR)
		return electionResult{state: next}
	}
	next.ISR = filter(cur.ISR, alive)
	return electionResult{state: next, ok: true}
}

// electControlledShutdown is controlledShutdownPartitionLeaderElection: the
// first replica in assignment order that is in the ISR, alive and not
// shutting down; the new ISR drops every shutting-down broker.
func electControlledShutdown(replicas []int32, cur LeaderIsr, alive, shuttingDown func(int32) bool, controllerEpoch int32) electionResult {
	eligible := func(b int32) bool { return alive(b) && !shuttingDown(b) }
	next := LeaderIsr{LeaderEpoch: cur.LeaderEpoch + 1, ControllerEpoch: controllerEpoch,
		ZkVersion: cur.ZkVersion, Leader: -1, ISR: filter(cur.ISR, func(b int32) bool { return !shuttingDown(b) })}
	for _, r := range replicas {
		if eligible(r) && slices.Contains(cur.ISR, r) {
			next.Leader = r
			return electionResult{state: next, ok: true}
		}
	}
	return electionResult{state: next}
}

// initialState is the state of a new partition
// (PartitionStateMachine.initializeLeaderAndIsrForPartitions): the live
// replicas form the ISR and the first of them leads, leader epoch 0.
func initialState(replicas []int32, alive func(int32) bool, controllerEpoch int32) (LeaderIsr, bool) {
	isr := filter(replicas, alive)
	if len(isr) == 0 {
		return LeaderIsr{}, false
	}
	return LeaderIsr{Leader: isr[0], LeaderEpoch: 0, ISR: isr, ControllerEpoch: controllerEpoch}, true
}

// removeFromIsr is the OfflineReplica transition for a follower: drop the
// replica from the ISR, a controller-made change that bumps the leader
// epoch. If it was the leader, the leader becomes -1.
func removeFromIsr(cur LeaderIsr, replica, controllerEpoch int32) LeaderIsr {
	next := LeaderIsr{Leader: cur.Leader, LeaderEpoch: cur.LeaderEpoch + 1, ControllerEpoch: controllerEpoch,
		ZkVersion: cur.ZkVersion, ISR: filter(cur.ISR, func(b int32) bool { return b != replica })}
	if next.Leader == replica {
		next.Leader = -1
	}
	if len(next.ISR) == 0 {
		next.ISR = slices.Clone(cur.ISR) // KAFKA-5083: keep the last ISR member
	}
	return next
}

func filter(s []int32, keep func(int32) bool) []int32 {
	out := make([]int32, 0, len(s))
	for _, v := range s {
		if keep(v) {
			out = append(out, v)
		}
	}
	return out
}
