package main

// kraftd bench gap: the data plane's steady-producer gap probe against a
// running cluster (cmd/kraftd/internal/probe). "gap" names what it reports,
// the longest time without an acknowledged write. `kraftd bench` without a
// subcommand is the side-by-side comparison of issue 17 (bench_compare.go).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kraftd/kraftd/cmd/kraftd/internal/probe"
)

const benchUsage = `usage: kraftd bench gap --bootstrap host:port[,...] [--topic T] [--rate N] [--duration D] [--no-leader-hints]

gap runs an idempotent acks=-1 franz-go producer at a steady rate for the
duration (or until SIGINT/SIGTERM), then reads the topic back
(read_committed) and prints one line: what was sent, acknowledged and failed,
the longest time without an acknowledgement, the ack latency p50/p99, and
whether every acknowledged record was read exactly once and in order. Run a
fault (kill -9 a leader, ...) while it runs. A missing topic is created with
--partitions, --replication-factor and min.insync.replicas 2 (1 at RF 1).

Exit status: 0 nothing acknowledged was lost, 1 a record was lost, duplicated
or reordered, or the run failed, 2 usage.`

func runBench(args []string, stdout io.Writer, stderr *os.File) int {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") && args[0] != "-h" && args[0] != "--help" {
		return runBenchCompare(args, stdout, stderr)
	}
	if args[0] != "gap" {
		fmt.Fprintln(stderr, compareUsage)
		fmt.Fprintln(stderr, benchUsage)
		if args[0] == "-h" || args[0] == "--help" {
			return exitOK
		}
		return exitUsage
	}
	fs := pflag.NewFlagSet("bench gap", pflag.ContinueOnError)
	fs.Usage = func() { fmt.Fprintf(fs.Output(), "%s\n\nFlags:\n%s", benchUsage, fs.FlagUsages()) }
	bootstrap := fs.String("bootstrap", "", "comma-separated broker addresses")
	topic := fs.String("topic", "kraftd-probe", "topic to produce to")
	rate := fs.Int("rate", 1000, "records per second")
	valueBytes := fs.Int("value-bytes", 100, "record value size")
	duration := fs.Duration("duration", 30*time.Second, "how long to produce")
	warmup := fs.Duration("warmup", time.Second, "least time left out of the figures; the window starts after it, once every record older than 200 ms is acknowledged")
	noHints := fs.Bool("no-leader-hints", false, "cap Produce at v9 so KIP-951 leader hints are off (as against Kafka 3.3)")
	partitions := fs.Int32("partitions", 3, "partitions of a topic the probe creates")
	rf := fs.Int16("replication-factor", 3, "replication factor of a topic the probe creates")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return exitOK
		}
		return report(stderr, exitUsage, err)
	}
	if *bootstrap == "" || fs.NArg() > 0 || *rate <= 0 || *duration <= 0 || *warmup < 0 || *partitions <= 0 || *rf <= 0 {
		fmt.Fprintln(stderr, benchUsage)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	brokers := strings.Split(*bootstrap, ",")
	if err := ensureTopic(ctx, brokers, *topic, *partitions, *rf); err != nil {
		return report(stderr, exitError, err)
	}
	p, err := probe.Start(probe.Config{Bootstrap: brokers, Topic: *topic, Rate: *rate, ValueBytes: *valueBytes, NoLeaderHints: *noHints})
	if err != nil {
		return report(stderr, exitError, err)
	}
	end := time.After(*duration)
	// The window starts after the warmup, once the producer is settled (a
	// fresh topic's first writes can wait for a follower's fetch backoff).
	steadyFrom := time.Duration(-1)
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
wait:
	for {
		select {
		case <-ctx.Done():
			break wait
		case <-end:
			break wait
		case <-poll.C:
			if steadyFrom < 0 && p.Since() >= *warmup && p.Settled(200*time.Millisecond) {
				steadyFrom = p.Since()
			}
		}
	}
	stop() // a second signal ends the process
	flushCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	res := p.Stop(flushCtx)
	cancel()
	if steadyFrom < 0 {
		fmt.Fprintln(stderr, "kraftd bench gap: the producer never settled (records older than 200 ms still unacknowledged); the figures cover the whole run")
	} else {
		res = p.Result(steadyFrom, res.Window)
	}
	verifyCtx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	v, err := p.Verify(verifyCtx)
	if err != nil {
		return report(stderr, exitError, fmt.Errorf("%v; verify: %w", res, err))
	}
	hints := "on"
	if *noHints {
		hints = "off (Produce <= v9)"
	}
	fmt.Fprintf(stdout, "gap: %v; leader hints %s; verify: %v\n", res, hints, v)
	for _, pr := range v.Problems {
		fmt.Fprintln(stderr, pr)
	}
	if len(v.Problems) > 0 {
		return exitError
	}
	return exitOK
}

// ensureTopic creates topic unless it exists.
func ensureTopic(ctx context.Context, brokers []string, topic string, partitions int32, rf int16) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	adm := kadm.NewClient(cl)
	defer adm.Close()
	minISR := strconv.Itoa(int(min(rf, 2)))
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(cctx, partitions, rf, map[string]*string{"min.insync.replicas": &minISR}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	return nil
}
