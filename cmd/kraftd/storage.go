package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/kraftd/kraftd/cmd/kraftd/app"
	"github.com/kraftd/kraftd/quorum/raftlog"
)

const storageUsage = `kraftd storage prepares and inspects log directories, like kafka-storage.sh.

Usage:
  kraftd storage format --cluster-id ID [--config FILE] [flags] [--ignore-formatted]
                        [--standalone | --initial-controllers ID@HOST:PORT:DIRID,... | --no-initial-controllers]
  kraftd storage random-uuid
  kraftd storage info [--config FILE] [flags]
  kraftd storage recover [--config FILE] [flags] [--unsafe-accept-data-loss]

format writes meta.properties (version=1, cluster.id, node.id, a fresh
directory.id) into every log directory and the metadata log directory.
-t is an alias of --cluster-id, as in kafka-storage.sh. A controller without
controller.quorum.voters belongs to a dynamic quorum (KIP-853) and needs one of
--standalone (-s: it is the first and only voter), --initial-controllers (-I:
the voter set, written with the same directory ids on every node) or
--no-initial-controllers (-N: it joins later through quorum add-controller).
The first two write the bootstrap snapshot
__cluster_metadata-0/00000000000000000000-0000000000.checkpoint holding
kraft.version 1 and the voters, as Kafka's formatter does.

recover repairs the metadata log of a stopped node that refused to start on
damaged data. It first writes (and fsyncs) a marker holding the highest epoch
in which the node may have voted, then cuts the log at the first invalid batch,
drops snapshots that do not parse and moves an unreadable quorum-state aside.
The node then rejoins without voting or standing for election until it has
caught up with a leader of that epoch or later. --unsafe-accept-data-loss
writes no marker: the node votes at once and may help elect a leader that lacks
records it acknowledged (the way out when a majority needs recovery at once).`

func runStorage(args []string, stdout io.Writer, stderr *os.File) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, storageUsage)
		return exitUsage
	}
	switch args[0] {
	case "random-uuid":
		id, err := app.RandomUUID(nil)
		if err != nil {
			return report(stderr, exitError, err)
		}
		fmt.Fprintln(stdout, id)
		return exitOK
	case "format":
		return runFormat(args[1:], stdout, stderr)
	case "info":
		return runInfo(args[1:], stdout, stderr)
	case "recover":
		return runRecover(args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprintln(stdout, storageUsage)
		return exitOK
	}
	fmt.Fprintf(stderr, "kraftd: unknown storage command %q\n\n%s\n", args[0], storageUsage)
	return exitUsage
}

func runFormat(args []string, stdout io.Writer, stderr *os.File) int {
	c := newCLI("kraftd storage format", storageUsage, map[string]string{"cluster.id": "t"})
	c.fs.BoolVarP(&c.ignoreFormatted, "ignore-formatted", "g", false,
		"skip directories that are already formatted instead of failing")
	var opts app.FormatOptions
	c.fs.BoolVarP(&opts.Standalone, "standalone", "s", false,
		"format this controller as the single voter of a new dynamic quorum (KIP-853)")
	c.fs.StringVarP(&opts.InitialControllers, "initial-controllers", "I", "",
		"the initial voters of a new dynamic quorum, id@host:port:directory-id,...; the same list on every node")
	c.fs.BoolVarP(&opts.NoInitialControllers, "no-initial-controllers", "N", false,
		"format a node of a dynamic quorum without naming its voters (a controller added later with quorum add-controller)")
	cfg, _, status, err := c.load(args, stderr)
	if err != nil {
		return report(stderr, status, err)
	}
	if cfg.ClusterID == "" {
		return report(stderr, exitUsage, errors.New("storage format needs --cluster-id (generate one with `kraftd storage random-uuid`)"))
	}
	opts.ClusterID, opts.IgnoreFormatted, opts.Out = cfg.ClusterID, c.ignoreFormatted, stdout
	err = app.Format(&cfg, opts)
	return report(stderr, exitError, err)
}

// runInfo prints what each directory holds, in the spirit of
// `kafka-storage.sh info`.
func runInfo(args []string, stdout io.Writer, stderr *os.File) int {
	c := newCLI("kraftd storage info", storageUsage, nil)
	cfg, _, status, err := c.load(args, stderr)
	if err != nil {
		return report(stderr, status, err)
	}
	problems := 0
	for _, dir := range cfg.AllLogDirs() {
		kind := "log directory"
		if dir == cfg.MetadataDir() {
			kind = "metadata log directory"
		}
		fmt.Fprintf(stdout, "Found %s:\n  %s\n", kind, dir)
		m, err := app.ReadMetaProperties(dir)
		if err != nil {
			problems++
			fmt.Fprintf(stdout, "Problem: %v\n\n", err)
			continue
		}
		fmt.Fprintf(stdout, "Found metadata: {cluster.id=%s, directory.id=%s, node.id=%d, version=%d}\n  in %s\n\n",
			m.ClusterID, m.DirectoryID, m.NodeID, m.Version, filepath.Join(dir, app.MetaPropertiesFile))
		if dir == cfg.MetadataDir() {
			problems += printRecovery(stdout, filepath.Join(dir, "__cluster_metadata-0"))
		}
	}
	if problems > 0 {
		fmt.Fprintf(stdout, "Found %d problem(s).\n", problems)
		return exitError
	}
	return exitOK
}

// runRecover repairs the metadata log behind a recovery marker (app.RecoverStorage).
func runRecover(args []string, stdout io.Writer, stderr *os.File) int {
	c := newCLI("kraftd storage recover", storageUsage, nil)
	unsafe := c.fs.Bool("unsafe-accept-data-loss", false,
		"repair without a recovery marker: the node votes at once and may help elect a leader that lacks records it acknowledged")
	cfg, _, status, err := c.load(args, stderr)
	if err != nil {
		return report(stderr, status, err)
	}
	err = app.RecoverStorage(&cfg, app.RecoverOptions{UnsafeAcceptDataLoss: *unsafe, Out: stdout})
	return report(stderr, exitError, err)
}

// printRecovery reports a recovery marker left by `kraftd storage recover` in the
// metadata log directory; an unreadable one counts as a problem.
func printRecovery(stdout io.Writer, logDir string) int {
	rec, err := raftlog.ReadRecovery(logDir)
	switch {
	case err != nil:
		fmt.Fprintf(stdout, "Problem: %v\n\n", err)
		return 1
	case rec != nil:
		fmt.Fprintf(stdout, "Recovering: %s holds epoch %d (quorum-state lost: %t); the node grants no vote until "+
			"it has caught up with a leader of that epoch or later\n\n", filepath.Join(logDir, raftlog.RecoveryFile),
			rec.Epoch, rec.StateLost)
	}
	return 0
}
