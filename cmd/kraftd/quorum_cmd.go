package main

// kraftd quorum describe: what `kafka-metadata-quorum.sh describe` prints
// (tools/.../MetadataQuorumCommand.java), fetched over the Kafka wire with
// DescribeCluster (for the cluster id) and DescribeQuorum.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/cmd/kraftd/app"
	"github.com/kraftd/kraftd/protocol"
)

const metadataTopic = "__cluster_metadata"

const quorumUsage = `usage:
  kraftd quorum describe --status|--replication [--human-readable] --bootstrap-controller host:port
  kraftd quorum add-controller --bootstrap-controller host:port|--bootstrap-server host:port --command-config FILE
  kraftd quorum remove-controller --bootstrap-controller host:port|--bootstrap-server host:port --controller-id N --controller-directory-id UUID`

func runQuorum(args []string, stdout io.Writer, stderr *os.File) int {
	if len(args) > 0 {
		switch args[0] {
		case "add-controller":
			return runAddController(args[1:], stdout, stderr)
		case "remove-controller":
			return runRemoveController(args[1:], stdout, stderr)
		}
	}
	if len(args) == 0 || args[0] != "describe" {
		fmt.Fprintln(stderr, quorumUsage)
		return exitUsage
	}
	fs := pflag.NewFlagSet("quorum describe", pflag.ContinueOnError)
	status := fs.Bool("status", false, "print the quorum status (leader, epoch, high watermark, voters, observers)")
	replication := fs.Bool("replication", false, "print each replica's log end offset, lag and fetch times")
	human := fs.Bool("human-readable", false, "with --replication: print timestamps as 'N ms ago'")
	bootstrap := fs.String("bootstrap-controller", "", "host:port of a controller (any voter; the leader is found from its answer)")
	timeout := fs.Duration("timeout", 10*time.Second, "overall deadline")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return exitOK
		}
		return report(stderr, exitUsage, err)
	}
	if *status == *replication || *bootstrap == "" {
		fmt.Fprintln(stderr, "kraftd: quorum describe needs exactly one of --status or --replication, and --bootstrap-controller host:port")
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	cl := protocol.NewClient(protocol.ClientConfig{ClientID: "kraftd-quorum-describe"})
	defer cl.Close()
	q, err := describeQuorum(ctx, cl, *bootstrap)
	if err != nil {
		return report(stderr, exitError, err)
	}
	if *status {
		clusterID := describeClusterID(ctx, cl, q.addr)
		printQuorumStatus(stdout, clusterID, q)
	} else {
		printQuorumReplication(stdout, q, *human, time.Now().UnixMilli())
	}
	return exitOK
}

type quorumInfo struct {
	addr  string
	part  kmsg.DescribeQuorumResponseTopicPartition
	nodes []kmsg.DescribeQuorumResponseNode
}

// describeQuorum asks addr, and follows a NOT_LEADER_OR_FOLLOWER answer to the leader's
// endpoint once (Kafka's admin client routes DescribeQuorum to the leader itself).
func describeQuorum(ctx context.Context, cl *protocol.Client, addr string) (quorumInfo, error) {
	for hop := 0; hop < 2; hop++ {
		req := kmsg.NewPtrDescribeQuorumRequest()
		req.SetVersion(-1)
		t := kmsg.NewDescribeQuorumRequestTopic()
		t.Topic = metadataTopic
		t.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
		req.Topics = []kmsg.DescribeQuorumRequestTopic{t}
		raw, err := cl.Request(ctx, addr, req)
		if err != nil {
			return quorumInfo{}, fmt.Errorf("DescribeQuorum to %s: %w (is a controller listening there?)", addr, err)
		}
		resp := raw.(*kmsg.DescribeQuorumResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return quorumInfo{}, fmt.Errorf("DescribeQuorum to %s: %w", addr, err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return quorumInfo{}, fmt.Errorf("DescribeQuorum to %s: malformed answer", addr)
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode == kerr.NotLeaderForPartition.Code && hop == 0 {
			if next := nodeAddr(resp.Nodes, p.LeaderID); next != "" {
				addr = next
				continue
			}
		}
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			return quorumInfo{}, fmt.Errorf("DescribeQuorum to %s: %w (leader %d, epoch %d)", addr, err, p.LeaderID, p.LeaderEpoch)
		}
		return quorumInfo{addr: addr, part: p, nodes: resp.Nodes}, nil
	}
	return quorumInfo{}, fmt.Errorf("DescribeQuorum: no leader found from %s", addr)
}

func nodeAddr(nodes []kmsg.DescribeQuorumResponseNode, id int32) string {
	for _, n := range nodes {
		if n.NodeID == id && len(n.Listeners) > 0 {
			return net.JoinHostPort(n.Listeners[0].Host, strconv.Itoa(int(n.Listeners[0].Port)))
		}
	}
	return ""
}

// describeClusterID reads the cluster id with DescribeCluster (controller endpoints,
// KIP-919, then broker endpoints); "" if neither is answered.
func describeClusterID(ctx context.Context, cl *protocol.Client, addr string) string {
	for _, endpointType := range []int8{2, 1} {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.SetVersion(-1)
		req.EndpointType = endpointType
		raw, err := cl.Request(ctx, addr, req)
		if err != nil {
			return ""
		}
		if resp := raw.(*kmsg.DescribeClusterResponse); resp.ErrorCode == 0 {
			return resp.ClusterID
		}
	}
	return ""
}

func printQuorumStatus(w io.Writer, clusterID string, q quorumInfo) {
	p := q.part
	leaderLEO, maxLag, maxLagMs := int64(-1), int64(0), int64(-1)
	var leaderCaughtUp int64 = -1
	for _, v := range p.CurrentVoters {
		if v.ReplicaID == p.LeaderID {
			leaderLEO, leaderCaughtUp = v.LogEndOffset, v.LastCaughtUpTimestamp
		}
	}
	var laggard *kmsg.DescribeQuorumResponseTopicPartitionReplicaState
	for i := range p.CurrentVoters {
		v := &p.CurrentVoters[i]
		if laggard == nil || v.LogEndOffset < laggard.LogEndOffset {
			laggard = v
		}
	}
	if laggard != nil && leaderLEO >= 0 {
		maxLag = leaderLEO - laggard.LogEndOffset
		switch {
		case laggard.ReplicaID == p.LeaderID:
			maxLagMs = 0
		case leaderCaughtUp >= 0 && laggard.LastCaughtUpTimestamp >= 0:
			maxLagMs = leaderCaughtUp - laggard.LastCaughtUpTimestamp
		}
	}
	fmt.Fprintf(w, "ClusterId:              %s\n", clusterID)
	fmt.Fprintf(w, "LeaderId:               %d\n", p.LeaderID)
	fmt.Fprintf(w, "LeaderEpoch:            %d\n", p.LeaderEpoch)
	fmt.Fprintf(w, "HighWatermark:          %d\n", p.HighWatermark)
	fmt.Fprintf(w, "MaxFollowerLag:         %d\n", maxLag)
	fmt.Fprintf(w, "MaxFollowerLagTimeMs:   %d\n", maxLagMs)
	fmt.Fprintf(w, "CurrentVoters:          %s\n", replicaList(p.CurrentVoters, q.nodes, true))
	fmt.Fprintf(w, "CurrentObservers:       %s\n", replicaList(p.Observers, q.nodes, false))
}

// replicaList renders [{"id": 1, "directoryId": null, "endpoints": ["CONTROLLER://h:p"]}, ...].
func replicaList(rs []kmsg.DescribeQuorumResponseTopicPartitionReplicaState, nodes []kmsg.DescribeQuorumResponseNode, endpoints bool) string {
	parts := make([]string, 0, len(rs))
	for _, r := range rs {
		s := fmt.Sprintf(`{"id": %d, "directoryId": %s`, r.ReplicaID, directoryID(r.ReplicaDirectoryID))
		if endpoints {
			var eps []string
			for _, n := range nodes {
				if n.NodeID != r.ReplicaID {
					continue
				}
				for _, l := range n.Listeners {
					eps = append(eps, fmt.Sprintf(`"%s://%s"`, l.Name, net.JoinHostPort(l.Host, strconv.Itoa(int(l.Port)))))
				}
			}
			s += `, "endpoints": [` + strings.Join(eps, ", ") + `]`
		}
		parts = append(parts, s+"}")
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func directoryID(id [16]byte) string {
	if id == ([16]byte{}) {
		return "null"
	}
	return `"` + uuidString(id) + `"`
}

func printQuorumReplication(w io.Writer, q quorumInfo, human bool, nowMs int64) {
	p := q.part
	var leaderLEO int64
	for _, v := range p.CurrentVoters {
		if v.ReplicaID == p.LeaderID {
			leaderLEO = v.LogEndOffset
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NodeId\tDirectoryId\tLogEndOffset\tLag\tLastFetchTimestamp\tLastCaughtUpTimestamp\tStatus")
	row := func(r kmsg.DescribeQuorumResponseTopicPartitionReplicaState, status string) {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%s\t%s\t%s\n", r.ReplicaID, strings.Trim(directoryID(r.ReplicaDirectoryID), `"`),
			r.LogEndOffset, max(leaderLEO-r.LogEndOffset, 0), stamp(r.LastFetchTimestamp, human, nowMs),
			stamp(r.LastCaughtUpTimestamp, human, nowMs), status)
	}
	for _, v := range p.CurrentVoters {
		if v.ReplicaID == p.LeaderID {
			row(v, "Leader")
		}
	}
	for _, v := range p.CurrentVoters {
		if v.ReplicaID != p.LeaderID {
			row(v, "Follower")
		}
	}
	for _, o := range p.Observers {
		row(o, "Observer")
	}
	tw.Flush()
}

func stamp(ms int64, human bool, nowMs int64) string {
	if !human || ms < 0 {
		return strconv.FormatInt(ms, 10)
	}
	return fmt.Sprintf("%d ms ago", max(nowMs-ms, 0))
}

func uuidString(id [16]byte) string { return app.UUID(id).String() }
