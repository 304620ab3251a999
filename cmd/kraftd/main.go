// Command kraftd runs a node of a Kafka-compatible KRaft metadata quorum, or
// the storage tools that prepare its directories. See doc.go.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/kraftd/kraftd/cmd/kraftd/app"
)

// version is set at build time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

// stopTimeout bounds the graceful stop after SIGINT/SIGTERM; past it the
// listeners are closed hard.
const stopTimeout = 30 * time.Second

// Exit statuses: 0 clean stop, 1 runtime or configuration error, 2 usage.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches the subcommands; it returns the exit status instead of
// exiting so tests can call it.
func run(args []string, stdout io.Writer, stderr *os.File) int {
	if len(args) > 0 {
		switch args[0] {
		case "version":
			fmt.Fprintf(stdout, "kraftd %s (%s %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return exitOK
		case "storage":
			return runStorage(args[1:], stdout, stderr)
		case "quorum":
			return runQuorum(args[1:], stdout, stderr)
		case "features":
			return runFeatures(args[1:], stdout, stderr)
		case "metadata":
			return runMetadata(args[1:], stdout, stderr)
		case "dev":
			return runDev(args[1:], stdout, stderr)
		case "check-divergence":
			return runCheckDivergence(args[1:], stdout, stderr)
		case "bench":
			return runBench(args[1:], stdout, stderr)
		}
	}
	return runNode(args, stdout, stderr)
}

// cli holds the flags that are not configuration keys, plus the flag set
// that carries one flag per key.
type cli struct {
	fs              *pflag.FlagSet
	configFile      string
	overrides       []string
	logFormat       string
	logLevel        string
	ignoreFormatted bool
}

// newCLI registers one string flag per configuration key, named after the
// key with dots as dashes and showing Kafka's default, so `--help` is the
// configuration reference. Values are parsed by app.Config.Set, which
// gives the same key-naming errors for flags, files and overrides.
func newCLI(name, usage string, shorthands map[string]string) *cli {
	c := &cli{fs: pflag.NewFlagSet(name, pflag.ContinueOnError)}
	c.fs.SortFlags = false
	c.fs.StringVarP(&c.configFile, "config", "c", "", "Kafka server.properties file to read first")
	c.fs.StringArrayVar(&c.overrides, "override", nil, "key=value for any configuration key; repeatable; wins over the file and flags")
	c.fs.StringVar(&c.logFormat, "log-format", "auto", "log format: console, json, or auto (console on a terminal, json otherwise)")
	c.fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	for _, k := range app.Keys() {
		c.fs.StringP(k.Flag(), shorthands[k.Name], k.Default, k.Doc)
	}
	c.fs.Usage = func() {
		fmt.Fprintf(c.fs.Output(), "%s\n\nFlags:\n%s", usage, c.fs.FlagUsages())
	}
	return c
}

// settings returns the configuration layers in precedence order: the
// --config file, then the flags given, then --override. With none of them
// the node runs the embedded default (app.EmbeddedDefaults).
func (c *cli) settings() ([][]app.Setting, bool, error) {
	var fromFile, fromFlags, fromOverrides []app.Setting
	if c.configFile != "" {
		var err error
		if fromFile, err = app.ReadPropertiesFile(c.configFile); err != nil {
			return nil, false, err
		}
	}
	for _, k := range app.Keys() {
		if f := c.fs.Lookup(k.Flag()); f.Changed {
			fromFlags = append(fromFlags, app.Setting{Key: k.Name, Value: f.Value.String()})
		}
	}
	for _, o := range c.overrides {
		key, value, ok := cutSetting(o)
		if !ok {
			return nil, false, fmt.Errorf("%w: --override %q is not key=value", app.ErrBadValue, o)
		}
		fromOverrides = append(fromOverrides, app.Setting{Key: key, Value: value})
	}
	embedded := c.configFile == "" && len(fromFlags) == 0 && len(fromOverrides) == 0
	if embedded {
		return [][]app.Setting{app.EmbeddedDefaults()}, true, nil
	}
	return [][]app.Setting{fromFile, fromFlags, fromOverrides}, false, nil
}

func cutSetting(s string) (string, string, bool) {
	key, value, ok := strings.Cut(s, "=")
	return strings.TrimSpace(key), value, ok && strings.TrimSpace(key) != ""
}

// load parses args and builds a validated Config plus the logger.
func (c *cli) load(args []string, stderr *os.File) (cfg app.Config, embedded bool, status int, err error) {
	if err := c.fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return cfg, false, exitOK, err
		}
		return cfg, false, exitUsage, err
	}
	if c.fs.NArg() > 0 {
		return cfg, false, exitUsage, fmt.Errorf("unexpected argument %q", c.fs.Arg(0))
	}
	logger, err := newLogger(c.logFormat, c.logLevel, stderr)
	if err != nil {
		return cfg, false, exitUsage, err
	}
	layers, embedded, err := c.settings()
	if err != nil {
		return cfg, false, exitError, err
	}
	if cfg, err = app.LoadConfig(layers...); err != nil {
		return cfg, false, exitError, err
	}
	cfg.Logger = logger
	if err := cfg.Validate(); err != nil {
		return cfg, false, exitError, err
	}
	return cfg, embedded, exitOK, nil
}

const nodeUsage = `kraftd runs a KRaft metadata quorum node that speaks the Kafka protocol.

Usage:
  kraftd [--config server.properties] [--override key=value]... [flags]
  kraftd storage format --cluster-id ID [same flags] [--ignore-formatted]
  kraftd storage random-uuid
  kraftd storage info [same flags]
  kraftd storage recover [same flags] [--unsafe-accept-data-loss]
  kraftd quorum describe --status|--replication --bootstrap-controller host:port
  kraftd quorum add-controller --bootstrap-controller host:port --command-config FILE
  kraftd quorum remove-controller --bootstrap-controller host:port --controller-id N --controller-directory-id UUID
  kraftd metadata dump <segment.log|snapshot.checkpoint|dir>...
  kraftd dev --controllers N --brokers M [--base-port P] [--dir DIR] [--mode kraft|zk-legacy]
  kraftd check-divergence --bootstrap host:port[,...] [--zookeeper-connect host:port]
  kraftd version

With no configuration at all, kraftd runs one combined broker+controller on
127.0.0.1:9092 (clients) and 127.0.0.1:9093 (controller) with data in
./kraftd-data, formatted on first start with a fresh cluster id.

Precedence: defaults < --config file < flags < --override.`

func runNode(args []string, stdout io.Writer, stderr *os.File) int {
	c := newCLI("kraftd", nodeUsage, nil)
	cfg, embedded, status, err := c.load(args, stderr)
	if err != nil {
		return report(stderr, status, err)
	}
	defer func() { _ = cfg.Logger.Sync() }() // nothing useful to do if stderr is gone
	cfg.Out = stdout
	if embedded {
		if err := mintClusterID(&cfg, stdout); err != nil {
			return report(stderr, exitError, err)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return report(stderr, exitError, serve(ctx, cfg))
}

// mintClusterID gives the embedded default a fresh cluster id when its
// directory is not formatted yet, and prints it so the user can reuse it.
func mintClusterID(cfg *app.Config, stdout io.Writer) error {
	formatted, err := app.StorageFormatted(cfg)
	if err != nil || formatted {
		return err
	}
	id, err := app.RandomUUID(nil)
	if err != nil {
		return err
	}
	cfg.ClusterID = id.String()
	fmt.Fprintf(stdout, "Generated cluster id %s for %s\n", cfg.ClusterID, cfg.MetadataDir())
	return nil
}

// serve runs the node until ctx is canceled by a signal, then stops it.
func serve(ctx context.Context, cfg app.Config) error {
	a, err := app.New(cfg)
	if err != nil {
		return err
	}
	if err := a.Start(ctx); err != nil {
		stopCtx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		return errors.Join(err, a.Stop(stopCtx))
	}
	var fatal error
	select {
	case <-ctx.Done():
		cfg.Logger.Info("signal received, stopping")
	case fatal = <-a.Fatal():
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	if fatal != nil {
		return errors.Join(fmt.Errorf("node stopped after a fatal error: %w", fatal), a.Stop(stopCtx))
	}
	return a.Stop(stopCtx)
}

// report prints err (if any) as one clear line and returns the status.
func report(stderr io.Writer, status int, err error) int {
	if err == nil {
		return exitOK
	}
	if errors.Is(err, pflag.ErrHelp) {
		return exitOK
	}
	fmt.Fprintf(stderr, "kraftd: %v\n", err)
	if status == exitOK {
		status = exitError
	}
	return status
}

// newLogger builds the zap logger on stderr: human-readable console lines
// on a terminal (or with --log-format console), JSON otherwise, so that log
// collectors get structured lines and people get readable ones.
func newLogger(format, level string, stderr *os.File) (*zap.Logger, error) {
	lvl, err := zap.ParseAtomicLevel(level)
	if err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	terminal := isTerminal(stderr)
	var enc zapcore.Encoder
	switch {
	case format == "console" || (format == "auto" && terminal):
		ec := zap.NewDevelopmentEncoderConfig()
		if terminal {
			ec.EncodeLevel = zapcore.CapitalColorLevelEncoder
		}
		enc = zapcore.NewConsoleEncoder(ec)
	case format == "json" || format == "auto":
		ec := zap.NewProductionEncoderConfig()
		ec.EncodeTime = zapcore.ISO8601TimeEncoder
		enc = zapcore.NewJSONEncoder(ec)
	default:
		return nil, fmt.Errorf("--log-format %q: want console, json or auto", format)
	}
	return zap.New(zapcore.NewCore(enc, zapcore.Lock(stderr), lvl)), nil
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
