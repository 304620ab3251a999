package app

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

const testClusterID = "MkU3OEVBNTcwNTJENDM2Qg"

func storageConfig(t *testing.T, nodeID string) (Config, []string) {
	t.Helper()
	root := t.TempDir()
	a, b, m := filepath.Join(root, "a"), filepath.Join(root, "b"), filepath.Join(root, "meta")
	c := embedded(t, Setting{"node.id", nodeID}, Setting{"controller.quorum.voters", nodeID + "@127.0.0.1:9093"},
		Setting{"log.dirs", a + "," + b}, Setting{"metadata.log.dir", m})
	return c, []string{a, b, m}
}

func TestMetaPropertiesEncodeIsKafkaFormat(t *testing.T) {
	m := MetaProperties{Version: 1, ClusterID: testClusterID, NodeID: 7, DirectoryID: "yM3EZlWpBDlR0JPyovvYEw"}
	got := string(m.Encode(time.Date(2024, 3, 15, 9, 5, 1, 0, time.UTC)))
	want := "#\n#Fri Mar 15 09:05:01 UTC 2024\n" +
		"cluster.id=MkU3OEVBNTcwNTJENDM2Qg\n" +
		"directory.id=yM3EZlWpBDlR0JPyovvYEw\n" +
		"node.id=7\n" +
		"version=1\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestFormatWritesEveryDirectory(t *testing.T) {
	c, dirs := storageConfig(t, "3")
	var out bytes.Buffer
	now := func() time.Time { return time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC) }
	if err := Format(&c, FormatOptions{ClusterID: testClusterID, Out: &out, Now: now}); err != nil {
		t.Fatal(err)
	}
	wantOut := "Formatting data directory " + dirs[0] + " with metadata.version 3.6-IV2.\n" +
		"Formatting data directory " + dirs[1] + " with metadata.version 3.6-IV2.\n" +
		"Formatting metadata directory " + dirs[2] + " with metadata.version 3.6-IV2.\n"
	if out.String() != wantOut {
		t.Errorf("output\n%s\nwant\n%s", out.String(), wantOut)
	}
	fileRE := regexp.MustCompile(`^#\n#Tue Jan 02 03:04:05 UTC 2024\ncluster.id=` + testClusterID +
		`\ndirectory.id=([A-Za-z0-9_-]{22})\nnode.id=3\nversion=1\n$`)
	seen := map[string]bool{}
	for _, dir := range dirs {
		raw, err := os.ReadFile(filepath.Join(dir, MetaPropertiesFile))
		if err != nil {
			t.Fatal(err)
		}
		match := fileRE.FindStringSubmatch(string(raw))
		if match == nil {
			t.Fatalf("%s: unexpected meta.properties:\n%s", dir, raw)
		}
		if seen[match[1]] {
			t.Errorf("directory.id %s reused", match[1])
		}
		seen[match[1]] = true
		if _, err := os.Stat(filepath.Join(dir, MetaPropertiesFile+".tmp")); !os.IsNotExist(err) {
			t.Errorf("temporary file left behind in %s", dir)
		}
		m, err := ReadMetaProperties(dir)
		if err != nil || m.ClusterID != testClusterID || m.NodeID != 3 || m.Version != 1 || m.DirectoryID != match[1] {
			t.Errorf("ReadMetaProperties(%s) = %+v, %v", dir, m, err)
		}
	}
}

func TestFormatRefusesFormattedUnlessIgnored(t *testing.T) {
	c, dirs := storageConfig(t, "1")
	if err := Format(&c, FormatOptions{ClusterID: testClusterID}); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(dirs[0], MetaPropertiesFile))
	err := Format(&c, FormatOptions{ClusterID: testClusterID})
	if !errors.Is(err, ErrAlreadyFormatted) || !strings.Contains(err.Error(), "--ignore-formatted") {
		t.Fatalf("second format: %v", err)
	}
	var out bytes.Buffer
	if err := Format(&c, FormatOptions{ClusterID: testClusterID, IgnoreFormatted: true, Out: &out}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "All of the log directories are already formatted.") {
		t.Errorf("output %q", out.String())
	}
	after, _ := os.ReadFile(filepath.Join(dirs[0], MetaPropertiesFile))
	if !bytes.Equal(before, after) {
		t.Error("--ignore-formatted rewrote a formatted directory")
	}
	if err := Format(&c, FormatOptions{ClusterID: "bogus"}); !errors.Is(err, ErrBadValue) {
		t.Errorf("bad cluster id: %v", err)
	}
}

func TestPrepareStorageRefusals(t *testing.T) {
	c, dirs := storageConfig(t, "1")
	if _, err := PrepareStorage(&c); !errors.Is(err, ErrNotFormatted) || !strings.Contains(err.Error(), "kraftd storage format") {
		t.Fatalf("unformatted without cluster id: %v", err)
	}
	c.ClusterID = testClusterID
	id, err := PrepareStorage(&c)
	if err != nil || id != testClusterID {
		t.Fatalf("auto-format: %q %v", id, err)
	}
	other, err := RandomUUID(nil)
	if err != nil {
		t.Fatal(err)
	}
	c.ClusterID = other.String()
	_, err = PrepareStorage(&c)
	if !errors.Is(err, ErrClusterIDMismatch) || !strings.Contains(err.Error(), testClusterID) ||
		!strings.Contains(err.Error(), other.String()) {
		t.Errorf("other cluster: %v", err)
	}
	c.ClusterID = ""
	c.NodeID = 9
	_, err = PrepareStorage(&c)
	if !errors.Is(err, ErrNodeIDMismatch) || !strings.Contains(err.Error(), "node id 1") || !strings.Contains(err.Error(), "node id 9") {
		t.Errorf("other node: %v", err)
	}
	// A new empty directory joins using the cluster id of its siblings.
	c.NodeID = 1
	extra := filepath.Join(filepath.Dir(dirs[0]), "c")
	c.LogDirs = append(c.LogDirs, extra)
	if id, err := PrepareStorage(&c); err != nil || id != testClusterID {
		t.Fatalf("new dir: %q %v", id, err)
	}
	if m, err := ReadMetaProperties(extra); err != nil || m.ClusterID != testClusterID {
		t.Errorf("new dir props %+v %v", m, err)
	}
}

func TestReadMetaPropertiesVersions(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, MetaPropertiesFile), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("version=0\nbroker.id=5\ncluster.id=" + testClusterID + "\n")
	if m, err := ReadMetaProperties(dir); err != nil || m.Version != 0 || m.NodeID != 5 {
		t.Errorf("v0: %+v %v", m, err)
	}
	for _, bad := range []string{"version=2\nnode.id=1\ncluster.id=x\n", "version=1\ncluster.id=x\n",
		"version=1\nnode.id=1\n", "version=1\nnode.id=1\ncluster.id=x\ndirectory.id=short\n"} {
		write(bad)
		if _, err := ReadMetaProperties(dir); !errors.Is(err, ErrBadMetaProperties) {
			t.Errorf("%q: err = %v, want ErrBadMetaProperties", bad, err)
		}
	}
}
