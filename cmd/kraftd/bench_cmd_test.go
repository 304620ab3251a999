package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// runBenchCmd runs `kraftd bench args...` in-process.
func runBenchCmd(t *testing.T, args ...string) (stdout, stderr string, status int) {
	t.Helper()
	errFile, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer errFile.Close()
	var out bytes.Buffer
	status = run(append([]string{"bench"}, args...), &out, errFile)
	errText, err := os.ReadFile(errFile.Name())
	if err != nil {
		t.Fatal(err)
	}
	return out.String(), string(errText), status
}

func TestBenchGapUsage(t *testing.T) {
	for _, args := range [][]string{
		{"nope"},
		{"gap"},
		{"gap", "--bootstrap", "127.0.0.1:1", "--rate", "0"},
		{"gap", "--bootstrap", "127.0.0.1:1", "--duration", "-1s"},
		{"gap", "--bootstrap", "127.0.0.1:1", "extra"},
		{"gap", "--no-such-flag"},
	} {
		if _, stderr, status := runBenchCmd(t, args...); status != exitUsage || !strings.Contains(stderr, "usage: kraftd bench gap") && !strings.Contains(stderr, "unknown flag") {
			t.Errorf("bench %q: status %d, stderr %q; want usage (2)", args, status, stderr)
		}
	}
}

// TestBenchGapAgainstKfake runs the command as a user would, against franz-go's
// in-memory cluster: it creates the topic, produces for the duration with the
// hints off, verifies, and prints its one line.
func TestBenchGapAgainstKfake(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stdout, stderr, status := runBenchCmd(t, "gap", "--bootstrap", strings.Join(c.ListenAddrs(), ","),
		"--topic", "gap", "--rate", "400", "--duration", "800ms", "--warmup", "200ms",
		"--replication-factor", "1", "--no-leader-hints")
	if status != exitOK {
		t.Fatalf("status %d\nstdout %s\nstderr %s", status, stdout, stderr)
	}
	line := regexp.MustCompile(`^gap: 400/s of 100 B for 0\.\ds: (\d+) sent, (\d+) acked, 0 failed; longest gap .*; leader hints off \(Produce <= v9\); verify: read (\d+) \((\d+) acked, 0 unacked, 0 foreign\): every acked record once, in order\n$`)
	m := line.FindStringSubmatch(stdout)
	if m == nil || m[1] != m[2] || m[3] != m[4] || m[1] == "0" {
		t.Fatalf("output %q does not match %v", stdout, line)
	}
}
