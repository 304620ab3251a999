// kraftd is one binary with subcommands:
//
//	kraftd [--config server.properties] [--override key=value]... [flags]
//	kraftd storage format|random-uuid|info
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
package main
