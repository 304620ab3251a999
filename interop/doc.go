// Package interop holds tests that look at kraftd from the outside: real
// Kafka clients (franz-go kgo/kadm/kmsg, IBM/sarama, segmentio/kafka-go,
// librdkafka through kcat, kafka-python) against in-process nodes started
// through cmd/kraftd/app in both modes, a wire check with Wireshark's Kafka
// dissector, a sweep over every advertised client-API version, benchmarks of
// whole clusters, and the layering lint that keeps the package graph in the
// shape DESIGN.md draws. README.md holds the client x mode x step table.
//
// The lint (layering_test.go) runs `go list -deps` over the module and
// parses the sources. Its rules:
//
//   - imports: protocol imports no project package; quorum only protocol
//     and its own subpackages; metadata/records nothing; metadata/image only
//     records; metadata/controller image, records, quorum, protocol; broker
//     not metadata/controller nor legacyzk; legacyzk not broker nor
//     metadata/controller; nothing imports cmd/kraftd or interop; only
//     cmd/kraftd and interop import cmd/kraftd/app; only cmd/kraftd imports
//     pflag.
//   - wallclock: no time.Now/After/Sleep/Since/Until in the deterministic
//     cores (quorum/*.go except node.go and transport.go, metadata/image,
//     metadata/controller), which take time as an argument.
//   - zapglobal: no zap.L() or zap.S() anywhere; loggers come in Config.
//   - barego: no `go func` literal in quorum, metadata or legacyzk non-test
//     files; goroutines start through a tracked helper (sync.WaitGroup.Go).
//
// A `// lint:ignore <rule>` comment on the offending line exempts it, e.g.
// `timer := time.After(d) // lint:ignore wallclock: the driver owns the clock`.
// Packages that do not exist yet are skipped.
package interop
