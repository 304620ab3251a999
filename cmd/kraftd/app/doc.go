// Package app wires a kraftd node together: it turns a Config (named after
// Kafka's server.properties keys) into running roles, in order, and stops
// them in reverse order.
//
// It is the one package that may import every other project package, and
// it is importable by the interop tests, so it never reads flags, os.Args or
// the environment: cmd/kraftd parses those and hands over a Config.
//
// What lives here:
//
//   - config.go, keys.go, validate.go: Config, the key table (name,
//     default, meaning) that also drives --help and the README, and the
//     cross-key checks with Kafka's wording.
//   - properties.go: Java .properties reading and writing, so that
//     server.properties files and meta.properties are byte-compatible.
//   - uuid.go: Kafka's base64 Uuid (cluster.id, directory.id).
//   - storage.go: meta.properties and `kraftd storage format`, matching
//     kafka-storage.sh; PrepareStorage formats empty directories on start
//     when the cluster id is known.
//   - app.go, metrics.go: App lifecycle; the per-node Prometheus registry
//     served on metrics.listener (one tracked HTTP goroutine).
//   - legacy_role.go: mode zk-legacy. One component runs a legacyzk.Broker
//     (ZooKeeper session, registration, /controller election, push APIs)
//     and serves broker.ClientAPI on its listener, reading the legacy
//     metadata cache and doing admin requests the ZooKeeper way. The
//     legacy broker binds that listener itself (it must register the bound
//     port), so App's own server does not; the cluster id comes from
//     /cluster/id and meta.properties is written as version 0 (broker.id),
//     as ZooKeeper-era Kafka does. Stop is Kafka's controlled shutdown.
//     With kraftd.fault.injection.enable, POST /faults on a loopback
//     metrics.listener flips legacyzk's fault switches.
//   - divergence.go: CheckDivergence, the logic of `kraftd
//     check-divergence`: each broker's Metadata against ZooKeeper
//     (zk-legacy), or against the brokers at the same image offset and the
//     quorum's high watermark (KRaft: a lagging broker is "behind at offset
//     N", never divergent).
//
// Goroutines: App starts none of its own. The protocol.Servers it owns
// (one for the broker listeners, one for the controller listeners, as
// Kafka's two SocketServers) run the accept and per-connection goroutines
// and stop them in Shutdown/Close;
// roles added later (quorum driver, controller loop, broker lifecycle) are
// started by Start and stopped by Stop in reverse start order. The signal
// wait lives in main, which calls Stop when SIGINT or SIGTERM arrives:
// signal.NotifyContext owns that wait.
package app
