package quorum_test

import (
	"flag"
	"path/filepath"
	"testing"

	"github.com/kraftd/kraftd/quorum/quorumtest"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata transcripts with actual output")

// TestInteraction runs every transcript in testdata. Each file ports one Kafka
// behaviour (named after the Kafka test) and shows state transitions as log lines.
func TestInteraction(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			env := quorumtest.NewEnv(1)
			quorumtest.RunFile(t, f, *rewrite, env.Handle)
		})
	}
}
