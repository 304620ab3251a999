package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/broker"
	"github.com/kraftd/kraftd/internal/testport"
	"github.com/kraftd/kraftd/protocol"
	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

// dynamicConfig is a node of a dynamic quorum: no controller.quorum.voters,
// only bootstrap servers.
func dynamicConfig(t *testing.T, nodeID, roles string) (Config, []string) {
	t.Helper()
	root := t.TempDir()
	a, m := filepath.Join(root, "a"), filepath.Join(root, "meta")
	listeners := "CONTROLLER://127.0.0.1:19093"
	if roles == "broker" {
		listeners = "PLAINTEXT://127.0.0.1:19092"
	}
	c := embedded(t, Setting{"node.id", nodeID}, Setting{"process.roles", roles},
		Setting{"listeners", listeners}, Setting{"controller.quorum.voters", ""},
		Setting{"controller.quorum.bootstrap.servers", "127.0.0.1:19093"},
		Setting{"log.dirs", a}, Setting{"metadata.log.dir", m})
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c, []string{a, m}
}

// readBootstrap parses the bootstrap snapshot of a metadata directory.
func readBootstrap(t *testing.T, metaDir string) quorum.Snapshot {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(metaDir, "__cluster_metadata-0", raftlog.SnapshotFileName(raftlog.BootstrapSnapshotID)))
	if err != nil {
		t.Fatal(err)
	}
	s, err := quorum.ParseSnapshot(raftlog.BootstrapSnapshotID, data)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestFormatStandalone: --standalone makes this controller the single voter of a
// kraft.version 1 quorum: the bootstrap snapshot names it with its controller
// listener and the metadata directory's own directory.id, as Kafka's formatter.
func TestFormatStandalone(t *testing.T) {
	c, dirs := dynamicConfig(t, "1", "controller")
	var out bytes.Buffer
	if err := Format(&c, FormatOptions{ClusterID: testClusterID, Standalone: true, Out: &out}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "Formatting dynamic metadata voter directory "+dirs[1]+" with") {
		t.Errorf("output:\n%s", out.String())
	}
	m, err := ReadMetaProperties(dirs[1])
	if err != nil {
		t.Fatal(err)
	}
	s := readBootstrap(t, dirs[1])
	dir, _ := ParseUUID(m.DirectoryID)
	want := quorum.VoterNode{Key: quorum.ReplicaKey{ID: 1, DirectoryID: dir},
		Endpoints:       []quorum.Endpoint{{Name: "CONTROLLER", Host: "127.0.0.1", Port: 19093}},
		KRaftVersionMin: 0, KRaftVersionMax: 1}
	if s.KRaft.KRaftVersion != 1 || !s.KRaft.Voters.Equal(quorum.VoterSet{Voters: []quorum.VoterNode{want}}) {
		t.Fatalf("bootstrap snapshot: kraft.version %d, voters %+v; want %+v", s.KRaft.KRaftVersion, s.KRaft.Voters, want)
	}
	if _, err := os.Stat(filepath.Join(dirs[0], "__cluster_metadata-0")); !os.IsNotExist(err) {
		t.Errorf("a data directory got a metadata partition: %v", err)
	}
}

// TestFormatInitialControllers: every node formatted with the same list gets the
// same voter set; a listed node's metadata directory takes the listed directory
// id, an unlisted node (a broker) keeps a random one; --no-initial-controllers
// writes no snapshot.
func TestFormatInitialControllers(t *testing.T) {
	list := "1@localhost:19093:" + "3Ga8Fze3ShKg6FQ9Sy6yPQ" + ",2@[::1]:29093:" + "UYvWh1d3RY2iESzWMvkQWw"
	c, dirs := dynamicConfig(t, "2", "controller")
	if err := Format(&c, FormatOptions{ClusterID: testClusterID, InitialControllers: list}); err != nil {
		t.Fatal(err)
	}
	if m, _ := ReadMetaProperties(dirs[1]); m.DirectoryID != "UYvWh1d3RY2iESzWMvkQWw" {
		t.Errorf("metadata directory.id %q, want the listed one", m.DirectoryID)
	}
	if m, _ := ReadMetaProperties(dirs[0]); m.DirectoryID == "UYvWh1d3RY2iESzWMvkQWw" {
		t.Error("the data directory took the voter's directory id")
	}
	s := readBootstrap(t, dirs[1])
	if got := s.KRaft.Voters.String(); got != "[1:dc66bc17 2:518bd687]" {
		t.Errorf("voters %s", got)
	}
	if v, _ := s.KRaft.Voters.Voter(2); len(v.Endpoints) != 1 || v.Endpoints[0] != (quorum.Endpoint{Name: "CONTROLLER", Host: "::1", Port: 29093}) {
		t.Errorf("voter 2 endpoints %+v", v.Endpoints)
	}

	b, bdirs := dynamicConfig(t, "7", "broker")
	var out bytes.Buffer
	if err := Format(&b, FormatOptions{ClusterID: testClusterID, InitialControllers: list, Out: &out}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "Formatting dynamic metadata directory "+bdirs[1]) {
		t.Errorf("output:\n%s", out.String())
	}
	if got := readBootstrap(t, bdirs[1]).KRaft.Voters.String(); got != "[1:dc66bc17 2:518bd687]" {
		t.Errorf("broker's voters %s", got)
	}

	n, ndirs := dynamicConfig(t, "3", "controller")
	if err := Format(&n, FormatOptions{ClusterID: testClusterID, NoInitialControllers: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(ndirs[1], "__cluster_metadata-0")); !os.IsNotExist(err) {
		t.Errorf("--no-initial-controllers wrote a metadata partition: %v", err)
	}
}

// TestFormatQuorumRefused: the combinations kafka-storage.sh refuses, and
// initial controller lists that do not describe a voter set, format nothing.
func TestFormatQuorumRefused(t *testing.T) {
	dirA, dirB := "3Ga8Fze3ShKg6FQ9Sy6yPQ", "UYvWh1d3RY2iESzWMvkQWw"
	for _, tc := range []struct {
		name, roles string
		opts        FormatOptions
		want        string
	}{
		{"no option", "controller", FormatOptions{}, "you must specify one of the following"},
		{"two options", "controller", FormatOptions{Standalone: true, NoInitialControllers: true}, "exclude each other"},
		{"standalone broker", "broker", FormatOptions{Standalone: true}, "only use --standalone on a controller"},
		{"no at", "controller", FormatOptions{InitialControllers: "1localhost:1:" + dirA}, "no @"},
		{"negative id", "controller", FormatOptions{InitialControllers: "-1@localhost:1:" + dirA}, "non-negative"},
		{"no port", "controller", FormatOptions{InitialControllers: "1@localhost:" + dirA}, "no colon after the port"},
		{"big port", "controller", FormatOptions{InitialControllers: "1@localhost:65536:" + dirA}, "0-65535"},
		{"bad dir", "controller", FormatOptions{InitialControllers: "1@localhost:1:xyz"}, "directory id"},
		{"zero dir", "controller", FormatOptions{InitialControllers: "1@localhost:1:AAAAAAAAAAAAAAAAAAAAAA"}, "reserved"},
		{"open bracket", "controller", FormatOptions{InitialControllers: "1@[::1:1:" + dirA}, "right bracket"},
		{"repeated id", "controller", FormatOptions{InitialControllers: "1@a:1:" + dirA + ",1@b:2:" + dirB}, "more than once"},
		{"repeated dir", "controller", FormatOptions{InitialControllers: "1@a:1:" + dirA + ",2@b:2:" + dirA}, "more than once"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, dirs := dynamicConfig(t, "1", tc.roles)
			tc.opts.ClusterID = testClusterID
			err := Format(&c, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Format = %v, want an error containing %q", err, tc.want)
			}
			for _, d := range dirs {
				if _, err := ReadMetaProperties(d); !errors.Is(err, ErrNotFormatted) {
					t.Errorf("%s formatted after a refusal: %v", d, err)
				}
			}
		})
	}
	// A static quorum cannot also be a dynamic one.
	c, _ := storageConfig(t, "1")
	if err := Format(&c, FormatOptions{ClusterID: testClusterID, Standalone: true}); err == nil ||
		!strings.Contains(err.Error(), "contradicts") {
		t.Fatalf("Format --standalone with controller.quorum.voters = %v", err)
	}
}

// TestStandaloneControllerServes: the first controller of a dynamic quorum
// (KIP-853), formatted --standalone and configured with
// controller.quorum.bootstrap.servers only, takes its voter set from the
// bootstrap snapshot, elects itself and serves CreateTopics; DescribeQuorum names
// it as the one voter.
func TestStandaloneControllerServes(t *testing.T) {
	// The voter record holds the controller's port, which peers and the broker
	// role dial: a fixed one, not :0.
	ctrl := testport.App.Addr(t)
	c := ephemeralConfig(t, Setting{"listeners", "PLAINTEXT://127.0.0.1:0,CONTROLLER://" + ctrl},
		Setting{"controller.quorum.voters", ""}, Setting{"controller.quorum.bootstrap.servers", ctrl},
		Setting{"broker.heartbeat.interval.ms", "100"})
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := Format(&c, FormatOptions{ClusterID: testClusterID, Standalone: true}); err != nil {
		t.Fatal(err)
	}
	a, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer a.Stop(context.Background())
	if err := a.Broker().WaitState(ctx, broker.StateRunning); err != nil {
		t.Fatalf("broker not running: %v", err)
	}
	cl := protocol.NewClient(protocol.ClientConfig{ClientID: "standalone-test"})
	defer cl.Close()
	resp, err := cl.Request(ctx, a.Addr("PLAINTEXT").String(), createTopicsReq("dyn", 3))
	if err != nil {
		t.Fatal(err)
	}
	if rt := resp.(*kmsg.CreateTopicsResponse).Topics[0]; rt.ErrorCode != 0 {
		t.Fatalf("CreateTopics: error %d %v", rt.ErrorCode, rt.ErrorMessage)
	}
	checkKRaftVersionFeature(t, ctx, cl, a.Addr("CONTROLLER").String(), 1)
	st, err := a.Quorum().Status(ctx)
	if err != nil || st.Role != quorum.Leader || !st.IsVoter || len(st.Voters) != 1 || st.Voters[0].ReplicaID != 1 {
		t.Fatalf("quorum status: %s, voter %t, voters %+v, %v", st.Role, st.IsVoter, st.Voters, err)
	}
}

// TestInitialControllersElect: three controllers formatted with the same
// --initial-controllers list and a fourth formatted --no-initial-controllers,
// all configured with controller.quorum.bootstrap.servers only, form a dynamic
// quorum: the three elect a leader among themselves at the addresses the voter
// set lists, every one of them replicates, and the fourth, which has no bootstrap
// snapshot, learns the voters from the leader's log and fetches as an observer.
func TestInitialControllersElect(t *testing.T) {
	var addrs []string
	for range 4 {
		addrs = append(addrs, testport.App.Addr(t))
	}
	var list []string
	var dirs [][16]byte
	for i := range 3 {
		dir, err := RandomUUID(nil)
		if err != nil {
			t.Fatal(err)
		}
		list = append(list, fmt.Sprintf("%d@%s:%s", i+1, addrs[i], dir))
		dirs = append(dirs, dir)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	apps := make([]*App, 4)
	for i := range 4 {
		c := embedded(t, Setting{"node.id", strconv.Itoa(i + 1)}, Setting{"process.roles", "controller"},
			Setting{"listeners", "CONTROLLER://" + addrs[i]}, Setting{"controller.quorum.voters", ""},
			Setting{"controller.quorum.bootstrap.servers", strings.Join(addrs[:3], ",")},
			Setting{"log.dirs", t.TempDir()}, Setting{"controller.quorum.election.timeout.ms", "200"})
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		opts := FormatOptions{ClusterID: testClusterID, InitialControllers: strings.Join(list, ",")}
		if i == 3 {
			opts = FormatOptions{ClusterID: testClusterID, NoInitialControllers: true}
		}
		if err := Format(&c, opts); err != nil {
			t.Fatal(err)
		}
		a, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		apps[i] = a
	}
	for _, a := range apps {
		if err := a.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer a.Stop(context.Background())
	}
	for {
		for _, a := range apps[:3] {
			st, err := a.Quorum().Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.Role != quorum.Leader || len(st.Voters) != 3 || len(st.Observers) != 1 {
				continue
			}
			caughtUp := st.Observers[0].LogEndOffset >= st.HighWatermark && st.Observers[0].ReplicaID == 4
			for _, v := range st.Voters {
				caughtUp = caughtUp && v.LogEndOffset >= st.HighWatermark
			}
			o, err := apps[3].Quorum().Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if caughtUp && st.HighWatermark > 0 && o.KRaftVersion == 1 && slices.Equal(o.VoterIDs, []int32{1, 2, 3}) &&
				!o.IsVoter {
				checkDescribeQuorumV2(t, ctx, a.Addr("CONTROLLER").String(), addrs[:3], dirs)
				return
			}
		}
		select {
		case <-ctx.Done():
			for i, a := range apps {
				st, _ := a.Quorum().Status(context.Background())
				t.Logf("node %d: %s epoch %d leader %d voter %t hw %d voter set %v (kraft.version %d) voters %+v observers %+v",
					i+1, st.Role, st.Epoch, st.LeaderID, st.IsVoter, st.HighWatermark, st.VoterIDs, st.KRaftVersion,
					st.Voters, st.Observers)
			}
			t.Fatal("no leader with three caught-up voters and the observer")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// checkDescribeQuorumV2 asks the leader at addr for DescribeQuorum v2: the voters
// carry the directory ids of the voter set and Nodes lists their controller
// listeners (KIP-853).
func checkDescribeQuorumV2(t *testing.T, ctx context.Context, addr string, voterAddrs []string, dirs [][16]byte) {
	t.Helper()
	cl := protocol.NewClient(protocol.ClientConfig{ClientID: "describe-test"})
	defer cl.Close()
	req := kmsg.NewPtrDescribeQuorumRequest()
	req.Version = 2
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
	req.Topics = []kmsg.DescribeQuorumRequestTopic{rt}
	raw, err := cl.Request(ctx, addr, req)
	if err != nil {
		t.Fatal(err)
	}
	resp := raw.(*kmsg.DescribeQuorumResponse)
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || len(p.CurrentVoters) != 3 || len(resp.Nodes) != 3 {
		t.Fatalf("DescribeQuorum v2: error %d, %d voters, %d nodes", p.ErrorCode, len(p.CurrentVoters), len(resp.Nodes))
	}
	for i, v := range p.CurrentVoters {
		n := resp.Nodes[i]
		want := voterAddrs[i]
		if v.ReplicaID != int32(i+1) || v.ReplicaDirectoryID != dirs[i] || n.NodeID != int32(i+1) || len(n.Listeners) != 1 ||
			n.Listeners[0].Name != "CONTROLLER" || net.JoinHostPort(n.Listeners[0].Host, strconv.Itoa(int(n.Listeners[0].Port))) != want {
			t.Fatalf("voter %d: %+v, node %+v; want directory id %x at %s", i+1, v, n, dirs[i], want)
		}
	}
}

// TestAddAndRemoveControllers: the path of issue 18's first "done when" over the
// wire, without processes: a controller formatted --standalone leads alone; two
// controllers formatted --no-initial-controllers fetch as observers and are added
// with AddRaftVoter (their own directory ids and listeners, as `kraftd quorum
// add-controller` sends them); DescribeQuorum lists three voters; RemoveRaftVoter of
// the first controller, the leader, commits, it resigns, and the other two elect a
// leader of a later epoch whose voter set is [2 3].
func TestAddAndRemoveControllers(t *testing.T) {
	var addrs []string
	for range 3 {
		addrs = append(addrs, testport.App.Addr(t))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	apps := make([]*App, 3)
	dirIDs := make([]UUID, 3)
	for i := range 3 {
		c := embedded(t, Setting{"node.id", strconv.Itoa(i + 1)}, Setting{"process.roles", "controller"},
			Setting{"listeners", "CONTROLLER://" + addrs[i]}, Setting{"controller.quorum.voters", ""},
			Setting{"controller.quorum.bootstrap.servers", addrs[0]},
			Setting{"log.dirs", t.TempDir()}, Setting{"controller.quorum.election.timeout.ms", "200"})
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		opts := FormatOptions{ClusterID: testClusterID, Standalone: i == 0, NoInitialControllers: i > 0}
		if err := Format(&c, opts); err != nil {
			t.Fatal(err)
		}
		var err error
		if dirIDs[i], err = metadataDirectoryID(&c); err != nil {
			t.Fatal(err)
		}
		if apps[i], err = New(c); err != nil {
			t.Fatal(err)
		}
		if err := apps[i].Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer apps[i].Stop(context.Background())
	}
	cl := protocol.NewClient(protocol.ClientConfig{ClientID: "voters-test"})
	defer cl.Close()
	for _, id := range []int32{2, 3} {
		host, portText, _ := net.SplitHostPort(addrs[id-1])
		port, _ := strconv.Atoi(portText)
		req := kmsg.NewPtrAddRaftVoterRequest()
		req.Version = 1
		req.ClusterID = kmsg.StringPtr(testClusterID)
		req.TimeoutMillis, req.VoterID, req.VoterDirectoryID, req.AckWhenCommitted = 5000, id, dirIDs[id-1], true
		req.Listeners = []kmsg.AddRaftVoterRequestListener{{Name: "CONTROLLER", Host: host, Port: uint16(port)}}
		for {
			raw, err := cl.Request(ctx, addrs[0], req)
			if err != nil {
				t.Fatal(err)
			}
			resp := raw.(*kmsg.AddRaftVoterResponse)
			if resp.ErrorCode == 0 {
				break
			}
			if resp.ErrorCode != kerr.RequestTimedOut.Code {
				t.Fatalf("AddRaftVoter %d: error %d %v", id, resp.ErrorCode, resp.ErrorMessage)
			}
			select { // the observer has not caught up yet: ask again
			case <-ctx.Done():
				t.Fatalf("AddRaftVoter %d: still REQUEST_TIMED_OUT: %v", id, resp.ErrorMessage)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	checkDescribeQuorumV2(t, ctx, addrs[0], addrs, [][16]byte{dirIDs[0], dirIDs[1], dirIDs[2]})

	rm := kmsg.NewPtrRemoveRaftVoterRequest()
	rm.ClusterID = kmsg.StringPtr(testClusterID)
	rm.VoterID, rm.VoterDirectoryID = 1, dirIDs[0]
	raw, err := cl.Request(ctx, addrs[0], rm)
	if err != nil {
		t.Fatal(err)
	}
	if resp := raw.(*kmsg.RemoveRaftVoterResponse); resp.ErrorCode != 0 {
		t.Fatalf("RemoveRaftVoter 1: error %d %v", resp.ErrorCode, resp.ErrorMessage)
	}
	for {
		st, err := apps[1].Quorum().Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.LeaderID == 2 || st.LeaderID == 3 {
			if slices.Equal(st.VoterIDs, []int32{2, 3}) && st.Epoch > 1 {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no leader among 2 and 3 after removing 1: node 2 is %s of %d at epoch %d, voters %v",
				st.Role, st.LeaderID, st.Epoch, st.VoterIDs)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// checkKRaftVersionFeature asks the controller listener at addr for ApiVersions v4:
// kraft.version is supported 0-1 and finalized at level, and AddRaftVoter (v0-v1)
// and RemoveRaftVoter (v0) are listed.
func checkKRaftVersionFeature(t *testing.T, ctx context.Context, cl *protocol.Client, addr string, level int16) {
	t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 4
	req.ClientSoftwareName, req.ClientSoftwareVersion = "kraftd-test", "0"
	raw, err := cl.Request(ctx, addr, req)
	if err != nil {
		t.Fatal(err)
	}
	resp := raw.(*kmsg.ApiVersionsResponse)
	sup := slices.IndexFunc(resp.SupportedFeatures, func(f kmsg.ApiVersionsResponseSupportedFeature) bool {
		return f.Name == "kraft.version" && f.MinVersion == 0 && f.MaxVersion == 1
	})
	fin := slices.IndexFunc(resp.FinalizedFeatures, func(f kmsg.ApiVersionsResponseFinalizedFeature) bool {
		return f.Name == "kraft.version" && f.MinVersionLevel == level && f.MaxVersionLevel == level
	})
	add := slices.IndexFunc(resp.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool { return k.ApiKey == 80 && k.MaxVersion == 1 })
	rm := slices.IndexFunc(resp.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool { return k.ApiKey == 81 && k.MaxVersion == 0 })
	if sup < 0 || fin < 0 || add < 0 || rm < 0 {
		t.Fatalf("ApiVersions v4 of the controller listener: supported %+v, finalized %+v, AddRaftVoter %d, RemoveRaftVoter %d",
			resp.SupportedFeatures, resp.FinalizedFeatures, add, rm)
	}
}

// TestRestartedControllerAdvertisesNewPort: the controller of a dynamic quorum
// (formatted --standalone) restarted on another controller port leads again and, at
// the start of its new epoch, rewrites its own entry in the voter set (KIP-853, as
// Kafka's LeaderState.appendStartOfEpochControlRecords): DescribeQuorum v2 then lists
// the new port, the one peers and brokers must dial. Without the rewrite the voter
// set kept the old port for good, since no one else sends UpdateRaftVoter for the
// leader.
func TestRestartedControllerAdvertisesNewPort(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	run := func(ctrl string, format bool) {
		c := embedded(t, Setting{"process.roles", "controller"}, Setting{"listeners", "CONTROLLER://" + ctrl},
			Setting{"controller.quorum.voters", ""}, Setting{"controller.quorum.bootstrap.servers", ctrl},
			Setting{"log.dirs", dir}, Setting{"controller.quorum.election.timeout.ms", "200"})
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		if format {
			if err := Format(&c, FormatOptions{ClusterID: testClusterID, Standalone: true}); err != nil {
				t.Fatal(err)
			}
		}
		a, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer a.Stop(context.Background())
		var port int32
		for {
			st, err := a.Quorum().Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.Role == quorum.Leader && st.HighWatermark > st.EpochStartOffset {
				port = describeQuorumV2Port(t, ctx, ctrl)
				_, want, _ := net.SplitHostPort(ctrl)
				if strconv.Itoa(int(port)) == want {
					return
				}
			}
			select {
			case <-ctx.Done():
				t.Fatalf("controller on %s: DescribeQuorum v2 lists port %d", ctrl, port)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	run(testport.App.Addr(t), true)
	run(testport.App.Addr(t), false)
}

// describeQuorumV2Port asks the leader at addr for DescribeQuorum v2 and returns the
// port of the one voter's CONTROLLER listener in Nodes.
func describeQuorumV2Port(t *testing.T, ctx context.Context, addr string) int32 {
	t.Helper()
	cl := protocol.NewClient(protocol.ClientConfig{ClientID: "describe-test"})
	defer cl.Close()
	req := kmsg.NewPtrDescribeQuorumRequest()
	req.Version = 2
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
	req.Topics = []kmsg.DescribeQuorumRequestTopic{rt}
	raw, err := cl.Request(ctx, addr, req)
	if err != nil {
		t.Fatal(err)
	}
	resp := raw.(*kmsg.DescribeQuorumResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.CurrentVoters) != 1 || len(resp.Nodes) != 1 ||
		len(resp.Nodes[0].Listeners) != 1 || resp.Nodes[0].Listeners[0].Name != "CONTROLLER" {
		t.Fatalf("DescribeQuorum v2: error %d, voters %+v, nodes %+v", p.ErrorCode, p.CurrentVoters, resp.Nodes)
	}
	return int32(resp.Nodes[0].Listeners[0].Port)
}
