package legacyzk

import (
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/kraftd/kraftd/metadata/records"
)

// Znode paths, as Kafka's ZkData names them.
const (
	ControllerPath         = "/controller"
	ControllerEpochPath    = "/controller_epoch"
	BrokerIDsPath          = "/brokers/ids"
	BrokerTopicsPath       = "/brokers/topics"
	BrokerSeqIDPath        = "/brokers/seqid"
	DeleteTopicsPath       = "/admin/delete_topics"
	IsrChangeNotifyPath    = "/isr_change_notification"
	LogDirEventNotifyPath  = "/log_dir_event_notification"
	ClusterIDPath          = "/cluster/id"
	ConfigChangesPath      = "/config/changes"
	ProducerIDBlockPath    = "/latest_producer_id_block"
	ConsumersPath          = "/consumers"
	ConfigTopicsPath       = "/config/topics"
	ReassignPartitionsPath = "/admin/reassign_partitions"
	PreferredElectionPath  = "/admin/preferred_replica_election"
)

// persistentPaths are created by every broker at startup (KafkaZkClient's
// createTopLevelPaths), so watches and children reads always find a parent.
var persistentPaths = []string{
	ConsumersPath, BrokerIDsPath, BrokerTopicsPath, ConfigChangesPath, DeleteTopicsPath,
	BrokerSeqIDPath, IsrChangeNotifyPath, ProducerIDBlockPath, LogDirEventNotifyPath,
	"/config/topics", "/config/clients", "/config/users", "/config/brokers", "/config/ips",
}

// BrokerPath is /brokers/ids/<id>.
func BrokerPath(id int32) string { return BrokerIDsPath + "/" + strconv.Itoa(int(id)) }

// TopicPath is /brokers/topics/<topic>.
func TopicPath(topic string) string { return BrokerTopicsPath + "/" + topic }

// PartitionsPath is /brokers/topics/<topic>/partitions.
func PartitionsPath(topic string) string { return TopicPath(topic) + "/partitions" }

// PartitionPath is /brokers/topics/<topic>/partitions/<p>.
func PartitionPath(topic string, p int32) string {
	return PartitionsPath(topic) + "/" + strconv.Itoa(int(p))
}

// PartitionStatePath is /brokers/topics/<topic>/partitions/<p>/state.
func PartitionStatePath(topic string, p int32) string { return PartitionPath(topic, p) + "/state" }

// DeleteTopicPath is /admin/delete_topics/<topic>.
func DeleteTopicPath(topic string) string { return DeleteTopicsPath + "/" + topic }

// ---- /controller -------------------------------------------------------

// ControllerZNode is the JSON of /controller (version 1, Kafka < 3.4:
// no kraftControllerEpoch).
type ControllerZNode struct {
	Version     int    `json:"version"`
	BrokerID    int32  `json:"brokerid"`
	TimestampMs string `json:"timestamp"` // epoch ms as a string, as Kafka writes it
}

// EncodeController is ControllerZNode.encode.
func EncodeController(brokerID int32, nowMs int64) []byte {
	b, _ := json.Marshal(ControllerZNode{Version: 1, BrokerID: brokerID, TimestampMs: strconv.FormatInt(nowMs, 10)})
	return b
}

// DecodeController returns the controller's broker id.
func DecodeController(b []byte) (int32, error) {
	var z ControllerZNode
	if err := json.Unmarshal(b, &z); err != nil {
		return -1, fmt.Errorf("%w: /controller: %v", ErrBadZnode, err)
	}
	return z.BrokerID, nil
}

// EncodeControllerEpoch is the plain decimal text Kafka writes.
func EncodeControllerEpoch(epoch int32) []byte { return []byte(strconv.Itoa(int(epoch))) }

// DecodeControllerEpoch parses /controller_epoch.
func DecodeControllerEpoch(b []byte) (int32, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%w: /controller_epoch %q", ErrBadZnode, b)
	}
	return int32(n), nil
}

// ---- /brokers/ids/<id> --------------------------------------------------

// BrokerInfo is one broker registration as the controller caches it.
type BrokerInfo struct {
	ID        int32
	Endpoints []records.BrokerEndpoint
	Rack      *string
	// Epoch is the registration znode's czxid (KIP-380); 0 until read back.
	Epoch int64
}

// Endpoint returns the endpoint of listener name.
func (b BrokerInfo) Endpoint(name string) (records.BrokerEndpoint, bool) {
	for _, e := range b.Endpoints {
		if e.Name == name {
			return e, true
		}
	}
	return records.BrokerEndpoint{}, false
}

type brokerZNode struct {
	Version     int                       `json:"version"`
	Host        *string                   `json:"host"`
	Port        int                       `json:"port"`
	JmxPort     int                       `json:"jmx_port"`
	TimestampMs string                    `json:"timestamp"`
	Endpoints   []string                  `json:"endpoints"`
	ProtoMap    map[string]string         `json:"listener_security_protocol_map"`
	Rack        *string                   `json:"rack,omitempty"`
	Features    map[string]map[string]int `json:"features"`
}

// securityProtocols maps Kafka's SecurityProtocol ids to names.
var securityProtocols = map[int16]string{0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}

func protocolID(name string) int16 {
	for id, n := range securityProtocols {
		if n == name {
			return id
		}
	}
	return 0
}

// EncodeBroker is BrokerIdZNode.encode at version 5 (IBP >= 2.7): host and
// port of the first PLAINTEXT endpoint (null/-1 if none), endpoint URIs,
// the listener to protocol map, rack and (empty) supported features.
func EncodeBroker(b BrokerInfo, nowMs int64) []byte {
	z := brokerZNode{Version: 5, Port: -1, JmxPort: -1, TimestampMs: strconv.FormatInt(nowMs, 10),
		Endpoints: []string{}, ProtoMap: map[string]string{}, Rack: b.Rack, Features: map[string]map[string]int{}}
	for _, e := range b.Endpoints {
		z.Endpoints = append(z.Endpoints, e.Name+"://"+net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port))))
		z.ProtoMap[e.Name] = securityProtocols[e.SecurityProtocol]
		if z.Host == nil && e.SecurityProtocol == 0 {
			h := e.Host
			z.Host, z.Port = &h, int(e.Port)
		}
	}
	out, _ := json.Marshal(z)
	return out
}

// DecodeBroker parses a broker registration (versions 1-5).
func DecodeBroker(id int32, data []byte) (BrokerInfo, error) {
	var z brokerZNode
	if err := json.Unmarshal(data, &z); err != nil {
		return BrokerInfo{}, fmt.Errorf("%w: broker %d: %v", ErrBadZnode, id, err)
	}
	b := BrokerInfo{ID: id, Rack: z.Rack}
	for _, uri := range z.Endpoints {
		name, hostport, ok := strings.Cut(uri, "://")
		host, port, err := net.SplitHostPort(hostport)
		n, perr := strconv.ParseUint(port, 10, 16)
		if !ok || err != nil || perr != nil {
			return BrokerInfo{}, fmt.Errorf("%w: broker %d endpoint %q", ErrBadZnode, id, uri)
		}
		proto := name
		if p, ok := z.ProtoMap[name]; ok {
			proto = p
		}
		b.Endpoints = append(b.Endpoints, records.BrokerEndpoint{Name: name, Host: host, Port: uint16(n), SecurityProtocol: protocolID(proto)})
	}
	return b, nil
}

// ---- /brokers/topics/<topic> -------------------------------------------

// TopicAssignment is the content of a topic znode.
type TopicAssignment struct {
	ID         records.UUID
	Partitions map[int32][]int32 // partition -> replicas, preferred leader first
	// zkVersion is the topic znode's version when read (0 when built).
	zkVersion int32
}

type topicZNode struct {
	Version  int                `json:"version"`
	ID       *string            `json:"topic_id,omitempty"`
	Parts    map[string][]int32 `json:"partitions"`
	Adding   map[string][]int32 `json:"adding_replicas"`
	Removing map[string][]int32 `json:"removing_replicas"`
}

// EncodeTopic is TopicZNode.encode at version 3 (Kafka 2.8+, topic ids).
func EncodeTopic(a TopicAssignment) []byte {
	id := a.ID.String()
	z := topicZNode{Version: 3, ID: &id, Parts: map[string][]int32{},
		Adding: map[string][]int32{}, Removing: map[string][]int32{}}
	for p, r := range a.Partitions {
		z.Parts[strconv.Itoa(int(p))] = r
	}
	out, _ := json.Marshal(z)
	return out
}

// DecodeTopic parses a topic znode (versions 1-3; an id is zero if absent).
func DecodeTopic(topic string, data []byte) (TopicAssignment, error) {
	var z topicZNode
	if err := json.Unmarshal(data, &z); err != nil {
		return TopicAssignment{}, fmt.Errorf("%w: topic %s: %v", ErrBadZnode, topic, err)
	}
	a := TopicAssignment{Partitions: make(map[int32][]int32, len(z.Parts))}
	if z.ID != nil {
		id, err := records.ParseUUID(*z.ID)
		if err != nil {
			return TopicAssignment{}, fmt.Errorf("%w: topic %s id %q", ErrBadZnode, topic, *z.ID)
		}
		a.ID = id
	}
	for k, r := range z.Parts {
		p, err := strconv.ParseInt(k, 10, 32)
		if err != nil {
			return TopicAssignment{}, fmt.Errorf("%w: topic %s partition %q", ErrBadZnode, topic, k)
		}
		a.Partitions[int32(p)] = r
	}
	return a, nil
}

// ---- partition state ----------------------------------------------------

// LeaderIsr is a partition state znode plus its version (the partition
// epoch), Kafka's LeaderIsrAndControllerEpoch.
type LeaderIsr struct {
	Leader          int32
	LeaderEpoch     int32
	ISR             []int32
	ControllerEpoch int32
	// RecoveryState is leader_recovery_state (KIP-704), 0 = recovered.
	RecoveryState int8
	// ZkVersion is the znode's data version (the partition epoch).
	ZkVersion int32
}

type stateZNode struct {
	Version         int     `json:"version"`
	Leader          int32   `json:"leader"`
	LeaderEpoch     int32   `json:"leader_epoch"`
	ISR             []int32 `json:"isr"`
	ControllerEpoch int32   `json:"controller_epoch"`
	RecoveryState   *int8   `json:"leader_recovery_state,omitempty"`
}

// EncodeState is TopicPartitionStateZNode.encode: the recovery state is
// written only when not RECOVERED.
func EncodeState(s LeaderIsr) []byte {
	z := stateZNode{Version: 1, Leader: s.Leader, LeaderEpoch: s.LeaderEpoch, ISR: s.ISR, ControllerEpoch: s.ControllerEpoch}
	if z.ISR == nil {
		z.ISR = []int32{}
	}
	if s.RecoveryState != 0 {
		rs := s.RecoveryState
		z.RecoveryState = &rs
	}
	out, _ := json.Marshal(z)
	return out
}

// DecodeState parses a state znode; the caller supplies its version.
func DecodeState(data []byte, zkVersion int32) (LeaderIsr, error) {
	var z stateZNode
	if err := json.Unmarshal(data, &z); err != nil {
		return LeaderIsr{}, fmt.Errorf("%w: partition state: %v", ErrBadZnode, err)
	}
	s := LeaderIsr{Leader: z.Leader, LeaderEpoch: z.LeaderEpoch, ISR: z.ISR, ControllerEpoch: z.ControllerEpoch, ZkVersion: zkVersion}
	if z.RecoveryState != nil {
		s.RecoveryState = *z.RecoveryState
	}
	return s, nil
}

// ---- /cluster/id --------------------------------------------------------

type clusterIDZNode struct {
	Version string `json:"version"` // "1": a string, as Kafka writes it
	ID      string `json:"id"`
}

// EncodeClusterID is ClusterIdZNode.toJson.
func EncodeClusterID(id string) []byte {
	b, _ := json.Marshal(clusterIDZNode{Version: "1", ID: id})
	return b
}

// DecodeClusterID parses /cluster/id.
func DecodeClusterID(b []byte) (string, error) {
	var z clusterIDZNode
	if err := json.Unmarshal(b, &z); err != nil || z.ID == "" {
		return "", fmt.Errorf("%w: /cluster/id %q", ErrBadZnode, b)
	}
	return z.ID, nil
}

// sortedPartitions returns a's partition ids in order.
func sortedPartitions(a map[int32][]int32) []int32 {
	out := make([]int32, 0, len(a))
	for p := range a {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}
