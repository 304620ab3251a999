package zkserver

import (
	"errors"
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
		t.Skip(err)
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
		t.Skip(err)
	}
	if _, err := Start(Config{}); err == nil {
		t.Fatal("Start without a directory")
	}
}
