package main

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kraftd/kraftd/legacyzk/zkserver"
)

// TestProcessDevZkLegacy: `kraftd dev --mode zk-legacy` starts a ZooKeeper
// and 3 broker processes; kadm creates a topic through them;
// `kraftd check-divergence` finds every broker in sync with ZooKeeper;
// SIGINT stops the brokers and ZooKeeper and removes the temporary data.
func TestProcessDevZkLegacy(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	zkRequired(t)
	bin := buildBinary(t)
	p := startDev(t, bin, "--mode", "zk-legacy", "--brokers", "3", "--base-port", "0")
	zk := p.waitLine(t, "zookeeper: ")
	bootstrap := p.waitLine(t, "bootstrap: ")
	dataDir := p.waitLine(t, "data: ")
	if id := p.waitLine(t, "cluster id: "); len(id) != 22 {
		t.Fatalf("cluster id %q is not a base64 UUID from /cluster/id", id)
	}
	if !zkserver.Serving(zk) {
		t.Fatalf("no ZooKeeper serving at %s", zk)
	}
	// Every broker serves its fault switches on loopback.
	faults := strings.Split(p.waitLine(t, "faults: "), ",")
	if len(faults) != 3 {
		t.Fatalf("faults line lists %v", faults)
	}
	for _, url := range faults {
		if !strings.HasPrefix(url, "http://127.0.0.1:") {
			t.Fatalf("fault switches served on %s", url)
		}
		resp, err := http.Post(url, "text/plain", strings.NewReader("clear"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("POST %s: %s", url, resp.Status)
		}
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...), kgo.RequestTimeoutOverhead(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 3, 3, nil, "orders"); err != nil {
		t.Fatal(err)
	}

	var out []byte
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, err = exec.Command(bin, "check-divergence", "--bootstrap", bootstrap, "--zookeeper-connect", zk).CombinedOutput()
		if err == nil || time.Now().After(deadline) {
			break
		}
		waitABit()
	}
	if err != nil || strings.Count(string(out), ": in sync\n") != 3 || !strings.Contains(string(out), "no divergence") {
		t.Fatalf("check-divergence: %v\n%s", err, out)
	}

	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(t); err != nil {
		t.Fatalf("kraftd dev after SIGINT: %v\nstderr:\n%s", err, p.err.String())
	}
	if zkserver.Serving(zk) {
		t.Errorf("ZooKeeper at %s outlived kraftd dev", zk)
	}
	if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
		t.Errorf("temporary data dir %s not removed: %v", dataDir, err)
	}
}
