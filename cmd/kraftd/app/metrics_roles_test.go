package app

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kraftd/kraftd/broker"
	"github.com/kraftd/kraftd/quorum"
)

// scrape fetches /metrics and returns every sample as "name{labels}" -> value.
func scrape(t *testing.T, a *App) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + a.MetricsAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %.300s", resp.StatusCode, body)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("bad sample %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// startMeteredNode starts a single combined node with a metrics listener and
// waits until its broker runs; the node stops when the test ends.
func startMeteredNode(t *testing.T) *App {
	t.Helper()
	c := ephemeralConfig(t,
		Setting{"controller.quorum.voters", "1@127.0.0.1:0"},
		Setting{"broker.heartbeat.interval.ms", "100"},
		Setting{"metrics.listener", "127.0.0.1:0"})
	a, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Stop(context.Background()) })
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := a.Broker().WaitState(ctx, broker.StateRunning); err != nil {
		t.Fatalf("broker not running: %v", err)
	}
	return a
}

// TestRoleMetricsOnACombinedNode scrapes a single combined node once its broker
// runs: the node leads the quorum, has committed (so the commit histogram has
// samples), sees one registered unfenced broker and counts its heartbeats.
func TestRoleMetricsOnACombinedNode(t *testing.T) {
	a := startMeteredNode(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	l := `{node="1"}`
	var m map[string]float64
	deadline := time.Now().Add(5 * time.Second)
	for {
		m = scrape(t, a)
		// The broker is RUNNING once unfenced; the counters trail by a heartbeat.
		if m["kraftd_controller_heartbeats_total"+l] >= 2 && m["kraftd_controller_fenced_brokers"+l] == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("heartbeats not counted or broker still fenced: %v", m)
		}
		waitTick()
	}
	// A Vote from a non-voter is refused and counted (issue 12).
	vote := quorum.Message{From: 99, Vote: &quorum.VoteRequest{VoterID: -1, CandidateEpoch: math.MaxInt32,
		CandidateID: 99, LastOffset: 1 << 20}}
	if out, err := a.Quorum().Step(ctx, vote); err != nil || out.VoteResp == nil ||
		out.VoteResp.ErrorCode != kerr.InconsistentVoterSet.Code {
		t.Fatalf("vote from 99: %v %v", out, err)
	}
	// The node publishes its counters after it handled the request, not
	// before it answers: wait for the count (seen at 0 once under -race).
	deadline = time.Now().Add(5 * time.Second)
	for m = scrape(t, a); m["kraftd_raft_inconsistent_voter_set_total"+l] < 1 && time.Now().Before(deadline); m = scrape(t, a) {
		waitTick()
	}
	want := map[string]float64{
		"kraftd_raft_inconsistent_voter_set_total" + l:         1,
		"kraftd_raft_conflicting_leader_total" + l:             0,
		"kraftd_raft_refused_response_total" + l:               0,
		"kraftd_raft_observers_untracked_total" + l:            0,
		"kraftd_raft_current_leader" + l:                       1,
		`kraftd_raft_current_state{node="1",state="leader"}`:   1,
		`kraftd_raft_current_state{node="1",state="follower"}`: 0,
		"kraftd_controller_active" + l:                         1,
		"kraftd_controller_registered_brokers" + l:             1,
		"kraftd_controller_fenced_brokers" + l:                 0,
		"kraftd_controller_topics" + l:                         0,
		"kraftd_controller_partitions" + l:                     0,
		"kraftd_broker_fenced" + l:                             0,
		broker.PendingPartitionFileWritesMetric + l:            0,
	}
	for k, v := range want {
		if got, ok := m[k]; !ok || got != v {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
		}
	}
	hw, leo := m["kraftd_raft_high_watermark"+l], m["kraftd_raft_log_end_offset"+l]
	if hw <= 0 || leo < hw || m["kraftd_raft_applied_offset"+l] <= 0 {
		t.Errorf("high watermark %v, log end %v, applied %v", hw, leo, m["kraftd_raft_applied_offset"+l])
	}
	if m["kraftd_raft_current_epoch"+l] < 1 {
		t.Errorf("epoch %v", m["kraftd_raft_current_epoch"+l])
	}
	// Registration, unfence and activation were each proposed and committed here.
	if n := m["kraftd_raft_commit_latency_seconds_count"+l]; n < 2 {
		t.Errorf("commit latency samples %v", n)
	}
	if n := m["kraftd_controller_heartbeat_latency_seconds_count"+l]; n < m["kraftd_controller_heartbeats_total"+l]-1 {
		t.Errorf("heartbeat latency samples %v for %v heartbeats", n, m["kraftd_controller_heartbeats_total"+l])
	}
	if inf := fmt.Sprintf(`kraftd_raft_commit_latency_seconds_bucket{node="1",le="+Inf"}`); m[inf] != m["kraftd_raft_commit_latency_seconds_count"+l] {
		t.Errorf("+Inf bucket %v != count", m[inf])
	}
}

// TestQuorumMetricsBeforeStart: a registry scraped before the node runs has the
// commit histogram and nothing that would read a missing node.
func TestQuorumMetricsBeforeStart(t *testing.T) {
	c := ephemeralConfig(t)
	a, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for name := range gather(t, a) {
		names[name] = true
	}
	if !names["kraftd_raft_commit_latency_seconds"] || names["kraftd_raft_current_epoch"] || !names["kraftd_controller_active"] {
		t.Errorf("families before start: %v", names)
	}
}

// waitTick paces polling of the metrics endpoint.
func waitTick() { <-time.After(20 * time.Millisecond) }

// TestSnapshotMetrics: a node that snapshots after every commit reports the latest
// snapshot's size (the file's), a small age, the count written and a log start that
// moved past 0 (retention 0 keeps no log below the snapshot).
func TestSnapshotMetrics(t *testing.T) {
	c := ephemeralConfig(t,
		Setting{"controller.quorum.voters", "1@127.0.0.1:0"},
		Setting{"broker.heartbeat.interval.ms", "100"},
		Setting{"metadata.log.max.record.bytes.between.snapshots", "1"},
		Setting{"metadata.max.retention.bytes", "0"},
		Setting{"metadata.max.idle.interval.ms", "0"}, // no NoOps: the log goes quiet once the broker runs
		Setting{"metrics.listener", "127.0.0.1:0"})
	a, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	l := `{node="1"}`
	if err := a.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := a.Broker().WaitState(ctx, broker.StateRunning); err != nil {
		t.Fatalf("broker not running: %v", err)
	}
	var m map[string]float64
	deadline := time.Now().Add(10 * time.Second)
	for {
		m = scrape(t, a)
		if m["kraftd_snapshots_written_total"+l] >= 1 && m["kraftd_raft_log_start_offset"+l] > 0 && !a.SnapshotDue() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no snapshot counted or log start still 0: %v", m)
		}
		waitTick()
	}
	// Stopped, the node writes no more snapshots: the gauge must name the newest file.
	if err := a.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	final := gather(t, a)
	cfg := a.Config()
	files, _ := filepath.Glob(filepath.Join(cfg.MetadataDir(), "__cluster_metadata-0", "*.checkpoint"))
	if len(files) == 0 {
		t.Fatal("no snapshot file")
	}
	slices.Sort(files) // the names are zero-padded end offsets: the last is the newest
	fi, err := os.Stat(files[len(files)-1])
	if err != nil {
		t.Fatal(err)
	}
	if b := final["kraftd_snapshot_latest_generated_bytes"]; b != float64(fi.Size()) {
		t.Errorf("latest snapshot bytes %v, newest snapshot file %s has %d", b, filepath.Base(files[len(files)-1]), fi.Size())
	}
	if age := final["kraftd_snapshot_latest_generated_age_ms"]; age < 0 || age > 10_000 {
		t.Errorf("latest snapshot age %v ms", age)
	}
	if final["kraftd_snapshots_written_total"] < m["kraftd_snapshots_written_total"+l] {
		t.Errorf("written count went down: %v after %v", final["kraftd_snapshots_written_total"], m["kraftd_snapshots_written_total"+l])
	}
}

// gather reads the registry directly (no listener needed): each family's last
// gauge or counter value by name.
func gather(t *testing.T, a *App) map[string]float64 {
	t.Helper()
	mfs, err := a.Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		out[mf.GetName()] = 0
		for _, mm := range mf.GetMetric() {
			out[mf.GetName()] = mm.GetGauge().GetValue() + mm.GetCounter().GetValue()
		}
	}
	return out
}
