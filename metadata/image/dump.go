package image

import (
	"bufio"
	"fmt"
	"hash/fnv"
	"io"
	"strings"

	"github.com/kraftd/kraftd/metadata/records"
)

// Dump returns a deterministic, sorted text form of the image, one fact
// per line, for golden tests and debugging. SCRAM key material is printed
// as (redacted); apart from it, two images are Equal exactly when their
// dumps are equal.
func (img *Image) Dump() string {
	var sb strings.Builder
	_ = img.WriteDump(&sb) // strings.Builder never fails
	return sb.String()
}

// WriteDump writes Dump's text to w.
func (img *Image) WriteDump(w io.Writer) error {
	bw := bufio.NewWriter(w)
	p := img.prov
	fmt.Fprintf(bw, "provenance offset=%d epoch=%d timestampMs=%d\n", p.Offset, p.Epoch, p.TimestampMs)
	for _, f := range img.features.sorted() {
		fmt.Fprintf(bw, "feature %s=%d\n", f.Name, f.Level)
	}
	img.security.dump(bw)
	for _, b := range img.brokers.All() {
		dumpBroker(bw, b)
	}
	for _, c := range img.controllers.All() {
		fmt.Fprintf(bw, "controller %d incarnation=%s zkMigrationReady=%t\n", c.ID, c.IncarnationID, c.ZkMigrationReady)
		dumpEndpoints(bw, c.Listeners, c.Features)
	}
	for t := range img.Topics() {
		fmt.Fprintf(bw, "topic %s id=%s partitions=%d\n", t.name, t.id, t.NumPartitions())
		for id, part := range t.parts.All {
			fmt.Fprintf(bw, "  %d %s\n", id, part)
		}
	}
	for res, set := range img.configs.All() {
		for _, e := range set {
			fmt.Fprintf(bw, "config %s %s=%s\n", res, e.Name, e.Value)
		}
	}
	if img.producerIDs.NextProducerID >= 0 {
		fmt.Fprintf(bw, "producerIds next=%d\n", img.producerIDs.NextProducerID)
	}
	return bw.Flush()
}

func dumpBroker(w io.Writer, b *Broker) {
	rack := "null"
	if b.Rack != nil {
		rack = fmt.Sprintf("%q", *b.Rack)
	}
	fmt.Fprintf(w, "broker %d epoch=%d incarnation=%s fenced=%t controlledShutdown=%t migratingZk=%t rack=%s\n",
		b.ID, b.Epoch, b.IncarnationID, b.Fenced, b.InControlledShutdown, b.IsMigratingZkBroker, rack)
	dumpEndpoints(w, b.Listeners, b.Features)
	if len(b.LogDirs) > 0 {
		fmt.Fprintf(w, "  logDirs %s\n", uuids(b.LogDirs))
	}
}

func dumpEndpoints(w io.Writer, eps []records.BrokerEndpoint, fs []records.BrokerFeature) {
	for _, e := range eps {
		fmt.Fprintf(w, "  listener %s %s:%d securityProtocol=%d\n", e.Name, e.Host, e.Port, e.SecurityProtocol)
	}
	for _, f := range fs {
		fmt.Fprintf(w, "  supports %s %d-%d\n", f.Name, f.MinSupportedVersion, f.MaxSupportedVersion)
	}
}

func uuids(us []records.UUID) string {
	s := make([]string, len(us))
	for i, u := range us {
		s[i] = u.String()
	}
	return "[" + strings.Join(s, " ") + "]"
}

// String prints the partition as in Dump: the always-present fields, then
// the optional ones only when set.
func (p Partition) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "replicas=%v isr=%v leader=%d leaderEpoch=%d partitionEpoch=%d",
		p.Replicas(), p.ISR(), p.Leader, p.LeaderEpoch, p.PartitionEpoch)
	for _, l := range []struct {
		name string
		ids  []int32
	}{{"removing", p.RemovingReplicas()}, {"adding", p.AddingReplicas()},
		{"elr", p.ELR()}, {"lastKnownElr", p.LastKnownELR()}} {
		if len(l.ids) > 0 {
			fmt.Fprintf(&sb, " %s=%v", l.name, l.ids)
		}
	}
	if p.LeaderRecoveryState == LeaderRecovering {
		sb.WriteString(" recovering")
	}
	if p.dirs != nil {
		fmt.Fprintf(&sb, " dirs=%s", uuids(p.dirs))
	}
	return sb.String()
}

// Hash is a 64-bit FNV-1a digest of Dump, for comparing images across
// nodes cheaply (ImageEquality in a simulation).
func (img *Image) Hash() uint64 {
	h := fnv.New64a()
	_ = img.WriteDump(h) // hash writers never fail
	img.security.writeSecrets(h)
	return h.Sum64()
}

// Equal reports whether two images hold the same state and provenance,
// including the SCRAM key material Dump leaves out.
func (img *Image) Equal(other *Image) bool {
	return img.Dump() == other.Dump() && img.security.secretsEqual(&other.security)
}
