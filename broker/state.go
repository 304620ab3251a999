package broker

import "strconv"

// State is the broker's lifecycle state, numbered as Kafka's
// org.apache.kafka.metadata.BrokerState (so metrics read the same).
type State int8

// Broker states (KIP-631).
const (
	StateNotRunning                State = 0
	StateStarting                  State = 1 // registering, catching up
	StateRecovery                  State = 2 // caught up, waiting to be unfenced
	StateRunning                   State = 3 // unfenced
	StatePendingControlledShutdown State = 6
	StateShuttingDown              State = 7
)

// String returns Kafka's name for the state.
func (s State) String() string {
	switch s {
	case StateNotRunning:
		return "NOT_RUNNING"
	case StateStarting:
		return "STARTING"
	case StateRecovery:
		return "RECOVERY"
	case StateRunning:
		return "RUNNING"
	case StatePendingControlledShutdown:
		return "PENDING_CONTROLLED_SHUTDOWN"
	case StateShuttingDown:
		return "SHUTTING_DOWN"
	}
	return "UNKNOWN(" + strconv.Itoa(int(s)) + ")"
}
