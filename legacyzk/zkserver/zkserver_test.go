package zkserver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestStartServesAndStops(t *testing.T) {
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s, err := Start(Config{Dir: dir, Port: port, TickMs: 200})
	if errors.Is(err, ErrNotInstalled) {
		SkipOrFail(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(s.Addr, ":"+strconv.Itoa(port)) || !Serving(s.Addr) {
		t.Fatalf("not serving on the asked port %d: %s", port, s.Addr)
	}
	cfg, err := os.ReadFile(filepath.Join(dir, "zoo.cfg"))
	if err != nil || !strings.Contains(string(cfg), "clientPortAddress=127.0.0.1\n") || !strings.Contains(string(cfg), "tickTime=200\n") {
		t.Fatalf("zoo.cfg: %v\n%s", err, cfg)
	}
	s.Stop()
	select {
	case <-s.Done():
	default:
		t.Fatal("Stop returned before the process exited")
	}
	if Serving(s.Addr) {
		t.Fatal("still serving after Stop")
	}
}

func TestStartNeedsADirectory(t *testing.T) {
	if _, _, err := Find(); err != nil {
		SkipOrFail(t, err)
	}
	if _, err := Start(Config{}); err == nil {
		t.Fatal("Start without a directory")
	}
}

// recordTB records how SkipOrFail ended a test.
type recordTB struct{ skipped, failed string }

func (r *recordTB) Helper()           {}
func (r *recordTB) Skip(args ...any)  { r.skipped = fmt.Sprint(args...) }
func (r *recordTB) Fatal(args ...any) { r.failed = fmt.Sprint(args...) }

// TestSkipOrFailFailsWhenRequired: with KRAFTD_REQUIRE_ZK=1 (CI) a missing
// ZooKeeper fails the test; without it, it skips.
func TestSkipOrFailFailsWhenRequired(t *testing.T) {
	t.Setenv(RequireEnv, "1")
	var r recordTB
	SkipOrFail(&r, ErrNotInstalled)
	if r.skipped != "" || !strings.Contains(r.failed, "KRAFTD_REQUIRE_ZK=1") {
		t.Fatalf("required: skipped %q, failed %q", r.skipped, r.failed)
	}
	t.Setenv(RequireEnv, "")
	r = recordTB{}
	SkipOrFail(&r, ErrNotInstalled)
	if r.failed != "" || r.skipped == "" {
		t.Fatalf("not required: skipped %q, failed %q", r.skipped, r.failed)
	}
}
