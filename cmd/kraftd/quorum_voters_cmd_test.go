package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kraftd/kraftd/cmd/kraftd/app"
	"github.com/kraftd/kraftd/internal/testport"
	"github.com/kraftd/kraftd/protocol"
)

// TestQuorumAddRemoveController: kraftd quorum add-controller, run with the new
// controller's properties file as kafka-metadata-quorum.sh is, adds it to a quorum
// started --standalone (its node.id, advertised controller listener and the
// directory.id of its metadata directory); remove-controller takes it out again.
func TestQuorumAddRemoveController(t *testing.T) {
	var addrs []string
	for range 2 {
		addrs = append(addrs, testport.Cmd.Addr(t))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var files []string
	for i := range 2 {
		dir := t.TempDir()
		props := fmt.Sprintf("process.roles=controller\nnode.id=%d\nlisteners=CONTROLLER://%s\n"+
			"controller.listener.names=CONTROLLER\ncontroller.quorum.bootstrap.servers=%s\nlog.dirs=%s\n",
			i+1, addrs[i], addrs[0], dir)
		file := filepath.Join(dir, "controller.properties")
		if err := os.WriteFile(file, []byte(props), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, file)
		mode := "--standalone"
		if i > 0 {
			mode = "--no-initial-controllers"
		}
		var out bytes.Buffer
		if status := runFormat([]string{"--config", file, "-t", testClusterID, mode}, &out, os.Stderr); status != exitOK {
			t.Fatalf("format node %d: status %d", i+1, status)
		}
		settings, err := app.ReadPropertiesFile(file)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := app.LoadConfig(settings)
		if err != nil {
			t.Fatal(err)
		}
		a, err := app.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer a.Stop(context.Background())
	}
	voters := func() []int32 {
		t.Helper()
		cl := protocol.NewClient(protocol.ClientConfig{ClientID: "test"})
		defer cl.Close()
		q, err := describeQuorum(ctx, cl, addrs[0])
		if err != nil {
			t.Fatal(err)
		}
		var ids []int32
		for _, v := range q.part.CurrentVoters {
			ids = append(ids, v.ReplicaID)
		}
		return ids
	}
	var out bytes.Buffer
	if status := runQuorum([]string{"add-controller", "--bootstrap-controller", addrs[0], "--command-config", files[1]},
		&out, os.Stderr); status != exitOK {
		t.Fatalf("add-controller: status %d", status)
	}
	dir := strings.Fields(out.String())[6]
	if !strings.HasPrefix(out.String(), "Added controller 2 with directory id ") || !slices.Equal(voters(), []int32{1, 2}) {
		t.Fatalf("add-controller printed %q; voters %v", out.String(), voters())
	}
	out.Reset()
	if status := runQuorum([]string{"remove-controller", "--bootstrap-controller", addrs[0], "--controller-id", "2",
		"--controller-directory-id", dir}, &out, os.Stderr); status != exitOK {
		t.Fatalf("remove-controller: status %d", status)
	}
	if got := voters(); !slices.Equal(got, []int32{1}) {
		t.Fatalf("voters after remove-controller: %v", got)
	}
}
