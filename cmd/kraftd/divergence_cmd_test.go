package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kraftd/kraftd/cmd/kraftd/app"
)

// runCheck runs `kraftd check-divergence args...` in-process.
func runCheck(t *testing.T, args ...string) (stdout, stderr string, status int) {
	t.Helper()
	errFile, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer errFile.Close()
	var out bytes.Buffer
	status = run(append([]string{"check-divergence"}, args...), &out, errFile)
	errText, err := os.ReadFile(errFile.Name())
	if err != nil {
		t.Fatal(err)
	}
	return out.String(), string(errText), status
}

func TestCheckDivergenceUsage(t *testing.T) {
	for _, args := range [][]string{{}, {"--bootstrap", "127.0.0.1:1", "extra"}, {"--no-such-flag"}} {
		if _, _, status := runCheck(t, args...); status != exitUsage {
			t.Errorf("%v: status %d, want %d", args, status, exitUsage)
		}
	}
	if _, _, status := runCheck(t, "--help"); status != exitOK {
		t.Errorf("--help: status %d", status)
	}
}

func TestCheckDivergenceUnreachable(t *testing.T) {
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t)) // nobody listens there
	_, errText, status := runCheck(t, "--bootstrap", addr, "--timeout", "5s")
	if status != exitError || !strings.Contains(errText, "no bootstrap broker reachable") {
		t.Fatalf("status %d, stderr %q", status, errText)
	}
}

func TestPrintDivergence(t *testing.T) {
	var out bytes.Buffer
	printDivergence(&out, &app.DivergenceReport{Mode: app.ModeKRaft, Truth: "metadata log high watermark 42",
		Brokers: []app.BrokerCheck{
			{ID: 1, Addr: "a:1", Status: "in sync"},
			{ID: 2, Addr: "b:2", Status: "behind at offset 17"},
			{ID: 3, Addr: "c:3", Status: "divergent", Differences: []string{"broker 3: partition foo-0: leader 3, but broker 1 at the same offset 41 has leader 1"}},
		}})
	want := "mode kraft, truth: metadata log high watermark 42\n" +
		"broker 1 (a:1): in sync\nbroker 2 (b:2): behind at offset 17\nbroker 3 (c:3): divergent\n" +
		"broker 3: partition foo-0: leader 3, but broker 1 at the same offset 41 has leader 1\nDIVERGENT\n"
	if out.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", out.String(), want)
	}
}
