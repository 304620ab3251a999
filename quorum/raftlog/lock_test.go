package raftlog

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// lockHelperEnv names the directory a re-executed test binary opens and holds
// (TestMain), as a second kraftd process would.
const lockHelperEnv = "RAFTLOG_LOCK_HELPER_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(lockHelperEnv); dir != "" {
		os.Exit(holdStorage(dir))
	}
	os.Exit(m.Run())
}

// holdStorage opens the storage in dir, says so on stdout, and keeps it open until
// stdin closes.
func holdStorage(dir string) int {
	s, err := OpenFileStorage(dir, FileOptions{})
	if err != nil {
		fmt.Println("open:", err)
		return 1
	}
	fmt.Println("open")
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := s.Close(); err != nil {
		return 1
	}
	return 0
}

// TestSecondProcessRefused: while another process has the metadata log directory
// open, OpenFileStorage and Recover fail with ErrDirLocked naming the lock file and
// the other process's pid, and change nothing; once it exits, the open succeeds.
func TestSecondProcessRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "__cluster_metadata-0")
	s := openTest(t, dir, FileOptions{})
	appendTest(t, s, mkLog(2)...)
	syncTest(t, s)
	closeTest(t, s)

	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), lockHelperEnv+"="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "open\n" {
		t.Fatalf("helper process: %q %v", line, err)
	}

	lockPath := filepath.Join(filepath.Dir(dir), LockFile)
	holder := fmt.Sprintf("process %d", cmd.Process.Pid)
	_, err = OpenFileStorage(dir, FileOptions{})
	if !errors.Is(err, ErrDirLocked) || !strings.Contains(err.Error(), lockPath) || !strings.Contains(err.Error(), holder) {
		t.Fatalf("open while %s holds the directory: %v; want ErrDirLocked naming %s and the %s", holder, err, lockPath, holder)
	}
	if _, err := Recover(dir, RecoverOptions{}); !errors.Is(err, ErrDirLocked) {
		t.Fatalf("recover while %s holds the directory: %v, want ErrDirLocked", holder, err)
	}
	if _, err := os.Stat(filepath.Join(dir, RecoveryFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused recover wrote its marker: %v", err)
	}

	_ = stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper process: %v", err)
	}
	s = openTest(t, dir, FileOptions{})
	sameBatches(t, load(t, s).Batches, mkLog(2))
}
