package main

// kraftd check-divergence: compare every broker's metadata with the source
// of truth (ZooKeeper in zk-legacy mode, the committed metadata log in
// KRaft mode). The logic lives in app.CheckDivergence so interop tests run
// exactly what this command runs.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/kraftd/kraftd/cmd/kraftd/app"
)

const divergenceUsage = `usage: kraftd check-divergence --bootstrap host:port[,host:port...] [--zookeeper-connect host:port[/chroot]] [--controller-admin host:port[,...]]

Compares every broker's view of the cluster metadata with the source of truth
and prints each difference. zk-legacy clusters (detected from the brokers'
ApiVersions, or named by --zookeeper-connect) are compared with ZooKeeper; with
--controller-admin (the brokers' metrics.listener addresses, started with
kraftd.fault.injection.enable) the active controller's in-memory partition
states are compared with ZooKeeper too. KRaft clusters are compared with the
committed metadata log, where a broker that lags shows as "behind at offset N"
and is never divergent.

Exit status: 0 no divergence, 1 divergence or the check could not run, 2 usage.`

func runCheckDivergence(args []string, stdout io.Writer, stderr *os.File) int {
	fs := pflag.NewFlagSet("check-divergence", pflag.ContinueOnError)
	fs.Usage = func() { fmt.Fprintf(fs.Output(), "%s\n\nFlags:\n%s", divergenceUsage, fs.FlagUsages()) }
	bootstrap := fs.String("bootstrap", "", "comma-separated broker addresses")
	zkConnect := fs.String("zookeeper-connect", "", "zk-legacy mode: ZooKeeper connect string (the source of truth)")
	ctrlAdmin := fs.String("controller-admin", "", "zk-legacy mode: comma-separated metrics.listener addresses serving GET /controller/view; the active controller's view is compared with ZooKeeper")
	rounds := fs.Int("rounds", 3, "a difference counts only when seen this many times in a row")
	settle := fs.Duration("settle", 200*time.Millisecond, "pause between rounds")
	timeout := fs.Duration("timeout", 30*time.Second, "overall deadline")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return exitOK
		}
		return report(stderr, exitUsage, err)
	}
	if *bootstrap == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, divergenceUsage)
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	rep, err := app.CheckDivergence(ctx, app.DivergenceConfig{
		Bootstrap: strings.Split(*bootstrap, ","), ZooKeeperConnect: *zkConnect, ControllerAdmin: splitList(*ctrlAdmin),
		Rounds: *rounds, SettleMs: int(settle.Milliseconds()),
	})
	if err != nil {
		return report(stderr, exitError, err)
	}
	printDivergence(stdout, rep)
	if rep.Divergent() {
		return exitError
	}
	return exitOK
}

// printDivergence prints one line per broker, then each difference.
func printDivergence(w io.Writer, rep *app.DivergenceReport) {
	fmt.Fprintf(w, "mode %s, truth: %s\n", rep.Mode, rep.Truth)
	for _, b := range rep.Brokers {
		fmt.Fprintf(w, "broker %d (%s): %s\n", b.ID, b.Addr, b.Status)
	}
	if c := rep.Controller; c != nil {
		fmt.Fprintf(w, "controller %d (%s): %s\n", c.ID, c.Addr, c.Status)
	}
	for _, b := range rep.Brokers {
		for _, d := range b.Differences {
			fmt.Fprintln(w, d)
		}
	}
	if c := rep.Controller; c != nil {
		for _, d := range c.Differences {
			fmt.Fprintln(w, d)
		}
	}
	if rep.Divergent() {
		fmt.Fprintln(w, "DIVERGENT")
	} else {
		fmt.Fprintln(w, "no divergence")
	}
}

// splitList splits a comma-separated flag value, "" giving none.
func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
