// kraftd is one binary with subcommands:
//
//	kraftd [--config server.properties] [--override key=value]... [flags]
//	kraftd storage format|random-uuid|info
//	kraftd quorum describe --status|--replication --bootstrap-controller host:port
//	kraftd metadata dump <segment.log|snapshot.checkpoint|dir>...
//	kraftd dev --controllers N --brokers M [--base-port P] [--dir DIR] [--mode kraft|zk-legacy]
//	kraftd check-divergence --bootstrap host:port[,...] [--zookeeper-connect host:port]
//	kraftd bench [--partitions 1000,10000,...] [--cap D] [--quick] [--out DIR]
//	kraftd bench gap --bootstrap host:port[,...] [--rate N] [--duration D] [--no-leader-hints]
//	kraftd version
//
// This package is the only one that parses flags (pflag) and builds the zap
// logger; everything else receives an app.Config. Each server.properties key
// is a flag of the same name with dots as dashes (--node-id,
// --controller-quorum-voters, ...); the precedence is defaults < --config
// file < flags < --override.
//
// Goroutines: main runs the node in its own goroutine and waits for
// SIGINT/SIGTERM through signal.NotifyContext; on a signal it calls
// app.Stop with a deadline and exits 0 if the stop was clean.
//
// kraftd dev is a supervisor, not a node: it re-executes this binary once per
// node and owns one waiter goroutine per child (exec.Cmd adds two copying
// goroutines per child for its output); it stops the children, brokers
// first, on SIGINT/SIGTERM and waits for every one before it exits. With
// --mode zk-legacy it also runs a ZooKeeper (legacyzk/zkserver: one child
// and its waiter goroutine), started before the brokers and stopped after
// them.
//
// kraftd check-divergence is a client: it runs app.CheckDivergence and
// prints one line per broker and one per difference; exit 1 if any broker
// diverges from the source of truth.
//
// kraftd bench gap is a client too: the steady-producer probe
// (cmd/kraftd/internal/probe, whose doc lists its goroutines) runs for
// --duration or until SIGINT/SIGTERM, then reads the topic back and prints
// one line.
//
// kraftd bench (no subcommand) is a supervisor like kraftd dev, one cluster
// at a time: per mode and partition count it runs a devCluster (its waiter
// goroutines, and ZooKeeper's in zk-legacy mode), drives it from the calling
// goroutine with synchronous polls, and stops it (SIGKILL when the run was
// capped or interrupted) before the next; the probe it runs across a
// controller fault is stopped before the fault's function returns.
package main
