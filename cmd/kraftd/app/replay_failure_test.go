package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kraftd/kraftd/internal/testport"
	"github.com/kraftd/kraftd/metadata/controller"
	"github.com/kraftd/kraftd/quorum"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

var errInjectedReplay = errors.New("injected: record cannot be applied")

// TestControllerReplayFailureHandsOverLeadership: three controllers; the
// active one stops being able to apply committed metadata. It resigns quorum
// leadership, reports the failure on its metric and to App.Fatal (which
// main turns into exit status 1), and another controller takes over and
// keeps committing.
func TestControllerReplayFailureHandsOverLeadership(t *testing.T) {
	ports := make([]int, 3)
	var voters []string
	for i := range ports {
		ports[i] = testport.App.Port(t)
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i+1, ports[i]))
	}
	var armed atomic.Int32 // the node whose controller fails its next data batch
	armed.Store(-1)
	apps := map[int32]*App{}
	for i, port := range ports {
		id := int32(i + 1)
		cfg, err := LoadConfig([]Setting{
			{"node.id", fmt.Sprint(id)}, {"process.roles", "controller"},
			{"listeners", fmt.Sprintf("CONTROLLER://127.0.0.1:%d", port)},
			{"controller.listener.names", "CONTROLLER"},
			{"controller.quorum.voters", strings.Join(voters, ",")},
			{"log.dirs", t.TempDir()}, {"cluster.id", testClusterID},
			// A fetch timeout far above the test's patience: only the
			// failed leader's resignation can elect a successor in time.
			{"controller.quorum.election.timeout.ms", "300"},
			{"controller.quorum.fetch.timeout.ms", "60000"},
			{"metadata.max.idle.interval.ms", "50"},
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		cfg.controllerReplayFault = func(b raftlog.Batch) error {
			if armed.Load() == id && !b.Control {
				return errInjectedReplay
			}
			return nil
		}
		a, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		apps[id] = a
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = a.Stop(ctx)
		})
	}
	leader := func() (int32, int32) {
		for id, a := range apps {
			if m := a.Quorum().Metrics(); m.Role == quorum.Leader {
				return id, m.Epoch
			}
		}
		return -1, -1
	}
	var first, firstEpoch int32
	pollUntil(t, "a leader whose controller committed the bootstrap", func() bool {
		first, firstEpoch = leader()
		if first < 0 {
			return false
		}
		img, _ := apps[first].Controller().CommittedImage()
		return img.MetadataVersion() > 0
	})
	armed.Store(first)
	var fatal error
	select {
	case fatal = <-apps[first].Fatal():
	case <-time.After(10 * time.Second):
		t.Fatal("the failing controller reported no fatal error")
	}
	if !errors.Is(fatal, controller.ErrReplay) || !errors.Is(fatal, errInjectedReplay) {
		t.Fatalf("fatal error %v", fatal)
	}
	if m := gather(t, apps[first]); m["kraftd_controller_metadata_error_count"] != 1 {
		t.Errorf("metadata_error_count = %v", m["kraftd_controller_metadata_error_count"])
	}
	// It resigned: a leader that did not would lead epoch firstEpoch until the
	// fetch timeout (60 s), its peers being alive.
	pollUntil(t, "the failed controller to give up leading its epoch", func() bool {
		m := apps[first].Quorum().Metrics()
		return m.Role != quorum.Leader || m.Epoch > firstEpoch
	})
	// Its resignation (EndQuorumEpoch) reached the peers before Stop returned
	// (the Node waits for their acknowledgements), and a Fetch answer the
	// leader sent just before it no longer restarts a peer's 60 s fetch timer
	// when it arrives after the EndQuorumEpoch (1 run in about 20 waited past
	// this test's patience for that reason).
	// The failed node stops as main does on App.Fatal (left running, it could
	// win the election its resignation starts: its log is the longest); the
	// new leader keeps committing (NoOpRecords every 50 ms) without it.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := apps[first].Stop(ctx); err != nil {
		t.Logf("stopping the failed node: %v", err)
	}
	var next, nextEpoch int32
	pollUntil(t, "another controller leading a later epoch", func() bool {
		next, nextEpoch = -1, -1
		for id, a := range apps {
			if m := a.Quorum().Metrics(); id != first && m.Role == quorum.Leader {
				next, nextEpoch = id, m.Epoch
			}
		}
		return next > 0 && nextEpoch > firstEpoch
	})
	_, from := apps[next].Controller().CommittedImage()
	pollUntil(t, "commits under the new leader", func() bool {
		img, off := apps[next].Controller().CommittedImage()
		return off > from+2 && img.Provenance().Epoch == nextEpoch && apps[next].Controller().Failed() == nil
	})
}

// pollUntil polls cond for up to 10 s.
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	pollWithin(t, what, 10*time.Second, cond)
}

// pollWithin polls cond on a 5 ms ticker until it holds, failing tb after
// timeout.
func pollWithin(tb testing.TB, what string, timeout time.Duration, cond func() bool) {
	tb.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(timeout)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			tb.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
	}
}
