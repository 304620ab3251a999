package main

// kraftd features: what kafka-features.sh does (Kafka's FeatureCommand), for the
// features kraftd lets operators change:
//   - describe: the supported and finalized levels in Kafka's format. With
//     --bootstrap-controller it asks the active controller (found with
//     DescribeQuorum) for ApiVersions on its controller listener, as Kafka 3.7+'s
//     --bootstrap-controller does: the finalized levels the quorum committed. With
//     --bootstrap-server it asks that broker, whose view may lag. A line on stderr
//     says which node was asked.
//   - upgrade / downgrade: UpdateFeatures to the active controller with
//     --metadata VERSION, --release-version VERSION (metadata.version of that
//     release; a downgrade also sends the release's other features at their level
//     there, 0 up to 3.9) or --feature name=level (metadata.version, kraft.version,
//     transaction.version and group.version at 0), --dry-run for ValidateOnly,
//     --unsafe for an unsafe downgrade (which the controller refuses, as Kafka's);
//   - disable --feature name: the feature to level 0.
// kraft.version 1 is the upgrade of KAFKA-16538: the leader writes the
// KRaftVersionRecord and the VotersRecord once every voter has reported its
// directory id (UpdateRaftVoter) and every broker supports the level.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/metadata/image"
	"github.com/kraftd/kraftd/protocol"
)

const featuresUsage = `usage:
  kraftd features describe  (--bootstrap-controller host:port | --bootstrap-server host:port)
  kraftd features upgrade   (--bootstrap-controller ... | --bootstrap-server ...)
                            [--metadata VERSION | --release-version VERSION] [--feature name=level]... [--dry-run]
  kraftd features downgrade (--bootstrap-controller ... | --bootstrap-server ...)
                            [--metadata VERSION | --release-version VERSION] [--feature name=level]... [--unsafe] [--dry-run]
  kraftd features disable   (--bootstrap-controller ... | --bootstrap-server ...) --feature name... [--unsafe] [--dry-run]
VERSION is a metadata.version: 3.6-IV2, or a release (3.6: its latest level).`

// Upgrade types of UpdateFeatures v1+ (Kafka's FeatureUpdate.UpgradeType).
const (
	upgradeTypeUpgrade         int8 = 1
	upgradeTypeSafeDowngrade   int8 = 2
	upgradeTypeUnsafeDowngrade int8 = 3
)

// releaseFeatures are the features besides metadata.version that a
// --release-version sets (Kafka's Features.PRODUCTION_FEATURES): their default
// level is 0 for every release up to 3.9, the newest metadata.version kraftd names.
var releaseFeatures = []string{"group.version", "transaction.version"}

// featureOp is one parsed upgrade, downgrade or disable.
type featureOp struct {
	op          string // upgrade, downgrade, disable
	upgradeType int8
	dryRun      bool
	updates     []kmsg.UpdateFeaturesRequestFeatureUpdate
}

func runFeatures(args []string, stdout io.Writer, stderr *os.File) int {
	if len(args) == 0 || !slices.Contains([]string{"describe", "upgrade", "downgrade", "disable"}, args[0]) {
		fmt.Fprintln(stderr, featuresUsage)
		return exitUsage
	}
	fs := pflag.NewFlagSet("features "+args[0], pflag.ContinueOnError)
	controller := fs.String("bootstrap-controller", "", "host:port of a controller of the quorum")
	server := fs.String("bootstrap-server", "", "host:port of a broker, which forwards the requests to the active controller")
	var metadata, release string
	var features []string
	var dryRun, unsafe bool
	if args[0] != "describe" {
		help := "feature=level to change; repeatable"
		if args[0] == "disable" {
			help = "feature to disable (set to level 0); repeatable"
		}
		fs.StringArrayVar(&features, "feature", nil, help)
		fs.BoolVar(&dryRun, "dry-run", false, "validate the change without doing it")
	}
	if args[0] == "upgrade" || args[0] == "downgrade" {
		fs.StringVar(&metadata, "metadata", "", "the metadata.version to change to, e.g. 3.7-IV1")
		fs.StringVar(&release, "release-version", "", "the release whose metadata.version (and features) to change to, e.g. 3.7")
	}
	if args[0] == "downgrade" || args[0] == "disable" {
		fs.BoolVar(&unsafe, "unsafe", false, "ask for an unsafe downgrade (one that may lose metadata); controllers refuse it, as Kafka's")
	}
	timeout := fs.Duration("timeout", 30*time.Second, "overall deadline")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return exitOK
		}
		return report(stderr, exitUsage, err)
	}
	if (*controller == "") == (*server == "") {
		fmt.Fprintln(stderr, "give exactly one of --bootstrap-controller and --bootstrap-server")
		fmt.Fprintln(stderr, featuresUsage)
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	cl := protocol.NewClient(protocol.ClientConfig{ClientID: "kraftd-features"})
	defer cl.Close()
	if args[0] == "describe" {
		return describeFeatures(ctx, cl, *controller, *server, stdout, stderr)
	}
	op, err := parseFeatureOp(args[0], metadata, release, features, unsafe, dryRun)
	if err != nil {
		return report(stderr, exitUsage, err)
	}
	bootstrap := *controller + *server
	return updateFeatures(ctx, cl, bootstrap, op, *timeout, stdout, stderr)
}

// parseFeatureOp turns the flags into updates, as FeatureCommand's
// handleUpgradeOrDowngrade and handleDisable.
func parseFeatureOp(op, metadata, release string, features []string, unsafe, dryRun bool) (featureOp, error) {
	fo := featureOp{op: op, upgradeType: upgradeTypeUpgrade, dryRun: dryRun}
	if op != "upgrade" {
		fo.upgradeType = upgradeTypeSafeDowngrade
		if unsafe {
			fo.upgradeType = upgradeTypeUnsafeDowngrade
		}
	}
	add := func(name string, level int16) error {
		if slices.ContainsFunc(fo.updates, func(u kmsg.UpdateFeaturesRequestFeatureUpdate) bool { return u.Feature == name }) {
			return fmt.Errorf("feature %s was specified more than once", name)
		}
		u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
		u.Feature, u.MaxVersionLevel, u.UpgradeType = name, level, fo.upgradeType
		u.AllowDowngrade = fo.upgradeType != upgradeTypeUpgrade
		fo.updates = append(fo.updates, u)
		return nil
	}
	switch {
	case release != "" && (metadata != "" || len(features) > 0):
		return fo, errors.New("can not specify --release-version with other feature flags")
	case release != "":
		level, err := parseMetadataVersion(release)
		if err != nil {
			return fo, err
		}
		_ = add(image.MetadataVersionFeature, level)
		if op == "downgrade" { // an upgrade does not send a feature at level 0
			for _, name := range releaseFeatures {
				_ = add(name, 0)
			}
		}
	case metadata != "":
		level, err := parseMetadataVersion(metadata)
		if err != nil {
			return fo, err
		}
		_ = add(image.MetadataVersionFeature, level)
	}
	for _, f := range features {
		name, level := f, int64(0)
		if op != "disable" {
			var levelText string
			var ok bool
			name, levelText, ok = strings.Cut(f, "=")
			if !ok {
				return fo, fmt.Errorf("can't parse feature=level string %s: equals sign not found", f)
			}
			var err error
			if level, err = strconv.ParseInt(strings.TrimSpace(levelText), 10, 16); err != nil {
				return fo, fmt.Errorf("can't parse feature=level string %s: unable to parse %s as a short", f, levelText)
			}
		}
		if err := add(strings.TrimSpace(name), int16(level)); err != nil {
			return fo, err
		}
	}
	if len(fo.updates) == 0 {
		return fo, fmt.Errorf("you must specify at least one feature to %s", op)
	}
	return fo, nil
}

func parseMetadataVersion(s string) (int16, error) {
	level, err := image.ParseMetadataVersion(s)
	if err != nil {
		return 0, fmt.Errorf("unknown metadata.version %s: give a level such as %s or a release such as 3.6 (%s to %s are known; `kraftd features describe` shows what the cluster supports)",
			s, image.MetadataVersionName(14), image.MetadataVersionName(4), image.MetadataVersionName(21))
	}
	return level, nil
}

// updateFeatures sends op and prints one line per feature, as FeatureCommand.update.
func updateFeatures(ctx context.Context, cl *protocol.Client, bootstrap string, op featureOp, timeout time.Duration, stdout io.Writer, stderr *os.File) int {
	req := kmsg.NewPtrUpdateFeaturesRequest()
	req.SetVersion(-1)
	req.TimeoutMillis = int32(timeout.Milliseconds())
	req.ValidateOnly = op.dryRun
	req.FeatureUpdates = op.updates
	results, err := sendUpdateFeatures(ctx, cl, bootstrap, req)
	if err != nil {
		return report(stderr, exitError, err)
	}
	sorted := slices.Clone(op.updates)
	slices.SortFunc(sorted, func(a, b kmsg.UpdateFeaturesRequestFeatureUpdate) int { return strings.Compare(a.Feature, b.Feature) })
	failures := 0
	var hints []string
	for _, u := range sorted {
		what := fmt.Sprintf("%s %s to %d", op.op, u.Feature, u.MaxVersionLevel)
		done := fmt.Sprintf("%sd to %d.", op.op, u.MaxVersionLevel)
		if op.op == "disable" {
			what, done = "disable "+u.Feature, "disabled."
		}
		switch err := results[u.Feature]; {
		case err != nil && op.dryRun:
			fmt.Fprintf(stdout, "Can not %s. %v\n", what, err)
		case err != nil:
			fmt.Fprintf(stdout, "Could not %s. %v\n", what, err)
		case op.dryRun:
			fmt.Fprintf(stdout, "%s can be %s\n", u.Feature, done)
		default:
			fmt.Fprintf(stdout, "%s was %s\n", u.Feature, done)
		}
		if err := results[u.Feature]; err != nil {
			failures++
			if h := featureHint(err); h != "" && !slices.Contains(hints, h) {
				hints = append(hints, h)
			}
		}
	}
	for _, h := range hints {
		fmt.Fprintln(stdout, "Hint: "+h)
	}
	if failures > 0 {
		return report(stderr, exitError, fmt.Errorf("%d out of %d operation(s) failed", failures, len(op.updates)))
	}
	return exitOK
}

// featureHint says what an operator can do about a refusal.
func featureHint(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "only supports versions"), strings.Contains(msg, "does not support this feature"):
		return "every controller and every registered broker must support the level: upgrade or remove the node named, " +
			"or choose a level in its range (`kraftd features describe --bootstrap-controller` shows the controllers' range)."
	case strings.Contains(msg, "could not be asked"):
		return "every controller must answer to check that it supports the level: start the controller named, or remove it from the quorum (`kraftd quorum remove-controller`)."
	case strings.Contains(msg, "might delete metadata information"), strings.Contains(msg, "Unsafe metadata downgrade"):
		return "a metadata.version in between changed the record formats, so the downgrade could lose metadata; " +
			"only downgrades to a level with the same formats are possible (kraftd, as Kafka, does no unsafe downgrade)."
	case strings.Contains(msg, "without setting the upgrade type"):
		return "use `kraftd features downgrade` to lower a level."
	case strings.Contains(msg, "Can't downgrade to a newer version"):
		return "use `kraftd features upgrade` to raise a level."
	case strings.Contains(msg, "has not reported"):
		return "every voter must be running and following the leader; each reports itself within seconds of a leader change, then retry."
	}
	return ""
}

// sendUpdateFeatures sends req to the quorum leader found through bootstrap, asking
// again while the answer is NOT_CONTROLLER or REQUEST_TIMED_OUT (a leader change, a
// leader whose voters have not all reported yet to it) until ctx ends. It returns
// each feature's outcome.
func sendUpdateFeatures(ctx context.Context, cl *protocol.Client, bootstrap string, req *kmsg.UpdateFeaturesRequest) (map[string]error, error) {
	for {
		q, err := describeQuorum(ctx, cl, bootstrap)
		if err != nil {
			return nil, err
		}
		raw, err := cl.Request(ctx, q.addr, req)
		if err != nil {
			return nil, err
		}
		resp := raw.(*kmsg.UpdateFeaturesResponse)
		out := map[string]error{}
		retry := false
		withMsg := func(code int16, msg *string) error {
			err := kerr.ErrorForCode(code)
			if err != nil && msg != nil && *msg != "" {
				err = &serverError{code: err, msg: *msg}
			}
			retry = retry || code == kerr.NotController.Code || code == kerr.RequestTimedOut.Code
			return err
		}
		top := withMsg(resp.ErrorCode, resp.ErrorMessage)
		for _, fu := range req.FeatureUpdates {
			out[fu.Feature] = top
		}
		for _, r := range resp.Results {
			out[r.Feature] = withMsg(r.ErrorCode, r.ErrorMessage)
		}
		if !retry {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return out, nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// serverError is a refusal with the server's message, printed alone as
// FeatureCommand prints it (the message already says what went wrong); errors.Is
// still finds the kerr code.
type serverError struct {
	code error
	msg  string
}

func (e *serverError) Error() string { return e.msg }
func (e *serverError) Unwrap() error { return e.code }

// describeFeatures prints the features one node advertises, in kafka-features.sh
// describe's format (metadata.version by name), and says on stderr which node it
// asked: the active controller for --bootstrap-controller, the broker for
// --bootstrap-server.
func describeFeatures(ctx context.Context, cl *protocol.Client, controller, server string, stdout io.Writer, stderr *os.File) int {
	addr, asked := server, "broker "+server+" (--bootstrap-server): its finalized levels may lag the controllers'; --bootstrap-controller asks them"
	if controller != "" {
		q, err := describeQuorum(ctx, cl, controller)
		if err != nil {
			return report(stderr, exitError, err)
		}
		addr = q.addr
		asked = fmt.Sprintf("the active controller %d at %s (--bootstrap-controller): finalized levels as the quorum committed them",
			q.part.LeaderID, q.addr)
	}
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(-1) // v4+ lists features whose minimum is 0, as kraft.version's
	req.ClientSoftwareName, req.ClientSoftwareVersion = "kraftd-features", "1"
	raw, err := cl.Request(ctx, addr, req)
	if err != nil {
		return report(stderr, exitError, fmt.Errorf("ApiVersions to %s: %w", addr, err))
	}
	resp := raw.(*kmsg.ApiVersionsResponse)
	fmt.Fprintln(stderr, "Asked "+asked+".")
	finalized := map[string]int16{}
	for _, f := range resp.FinalizedFeatures {
		finalized[f.Name] = f.MaxVersionLevel
	}
	supported := slices.Clone(resp.SupportedFeatures)
	slices.SortFunc(supported, func(a, b kmsg.ApiVersionsResponseSupportedFeature) int { return strings.Compare(a.Name, b.Name) })
	epoch := "-"
	if resp.FinalizedFeaturesEpoch >= 0 {
		epoch = strconv.FormatInt(resp.FinalizedFeaturesEpoch, 10)
	}
	for _, f := range supported {
		fmt.Fprintf(stdout, "Feature: %s\tSupportedMinVersion: %s\tSupportedMaxVersion: %s\tFinalizedVersionLevel: %s\tEpoch: %s\n",
			f.Name, levelText(f.Name, f.MinVersion), levelText(f.Name, f.MaxVersion), levelText(f.Name, finalized[f.Name]), epoch)
	}
	return exitOK
}

// levelText prints a level as FeatureCommand.levelToString: metadata.version by name.
func levelText(feature string, level int16) string {
	if feature != image.MetadataVersionFeature {
		return strconv.Itoa(int(level))
	}
	if name := image.MetadataVersionName(level); name != strconv.Itoa(int(level)) {
		return name
	}
	return "UNKNOWN " + strconv.Itoa(int(level))
}
