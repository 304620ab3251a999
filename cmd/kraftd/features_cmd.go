package main

// kraftd features: what kafka-features.sh --bootstrap-controller does for the
// feature kraftd lets operators change, kraft.version (KIP-853, KAFKA-16538):
// `describe` prints the supported and finalized levels the quorum leader
// advertises in ApiVersions, `upgrade --feature kraft.version=1` sends
// UpdateFeatures to the leader, which writes the KRaftVersionRecord and the
// VotersRecord once every voter has reported its directory id (UpdateRaftVoter) and
// every broker supports the level.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/protocol"
)

const featuresUsage = `usage:
  kraftd features describe --bootstrap-controller host:port
  kraftd features upgrade --bootstrap-controller host:port|--bootstrap-server host:port --feature kraft.version=1 [--dry-run]`

func runFeatures(args []string, stdout io.Writer, stderr *os.File) int {
	if len(args) == 0 || (args[0] != "describe" && args[0] != "upgrade") {
		fmt.Fprintln(stderr, featuresUsage)
		return exitUsage
	}
	fs := pflag.NewFlagSet("features "+args[0], pflag.ContinueOnError)
	bootstrap := bootstrapFlags(fs)
	var updates []string
	dryRun := false
	if args[0] == "upgrade" {
		fs.StringArrayVar(&updates, "feature", nil, "feature=level to upgrade to; repeatable")
		fs.BoolVar(&dryRun, "dry-run", false, "validate the upgrade without doing it")
	}
	timeout := fs.Duration("timeout", 30*time.Second, "overall deadline")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return exitOK
		}
		return report(stderr, exitUsage, err)
	}
	if bootstrap() == "" || (args[0] == "upgrade" && len(updates) == 0) {
		fmt.Fprintln(stderr, featuresUsage)
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	cl := protocol.NewClient(protocol.ClientConfig{ClientID: "kraftd-features"})
	defer cl.Close()
	if args[0] == "describe" {
		return describeFeatures(ctx, cl, bootstrap(), stdout, stderr)
	}
	req := kmsg.NewPtrUpdateFeaturesRequest()
	req.SetVersion(-1)
	req.TimeoutMillis = int32(timeout.Milliseconds())
	req.ValidateOnly = dryRun
	for _, u := range updates {
		name, levelText, ok := strings.Cut(u, "=")
		level, err := strconv.ParseInt(levelText, 10, 16)
		if !ok || name == "" || err != nil {
			return report(stderr, exitUsage, fmt.Errorf("--feature %q: want name=level", u))
		}
		fu := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
		fu.Feature, fu.MaxVersionLevel, fu.UpgradeType = name, int16(level), 1
		req.FeatureUpdates = append(req.FeatureUpdates, fu)
	}
	results, err := sendUpdateFeatures(ctx, cl, bootstrap(), req)
	if err != nil {
		return report(stderr, exitError, err)
	}
	status := exitOK
	for _, fu := range req.FeatureUpdates {
		switch err := results[fu.Feature]; {
		case err != nil:
			fmt.Fprintf(stdout, "Could not upgrade %s to %d. %v\n", fu.Feature, fu.MaxVersionLevel, err)
			status = exitError
		case dryRun:
			fmt.Fprintf(stdout, "%s can be upgraded to %d\n", fu.Feature, fu.MaxVersionLevel)
		default:
			fmt.Fprintf(stdout, "%s was upgraded to %d.\n", fu.Feature, fu.MaxVersionLevel)
		}
	}
	return status
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
			if err != nil && msg != nil {
				err = fmt.Errorf("%w: %s", err, *msg)
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

// describeFeatures prints the features the quorum leader advertises, in
// kafka-features.sh describe's format.
func describeFeatures(ctx context.Context, cl *protocol.Client, bootstrap string, stdout io.Writer, stderr *os.File) int {
	q, err := describeQuorum(ctx, cl, bootstrap)
	if err != nil {
		return report(stderr, exitError, err)
	}
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(-1) // v4+ lists features whose minimum is 0, as kraft.version's
	req.ClientSoftwareName, req.ClientSoftwareVersion = "kraftd-features", "1"
	raw, err := cl.Request(ctx, q.addr, req)
	if err != nil {
		return report(stderr, exitError, err)
	}
	resp := raw.(*kmsg.ApiVersionsResponse)
	finalized := map[string]int16{}
	for _, f := range resp.FinalizedFeatures {
		finalized[f.Name] = f.MaxVersionLevel
	}
	for _, f := range resp.SupportedFeatures {
		fmt.Fprintf(stdout, "Feature: %s\tSupportedMinVersion: %d\tSupportedMaxVersion: %d\tFinalizedVersionLevel: %d\tEpoch: %d\n",
			f.Name, f.MinVersion, f.MaxVersion, finalized[f.Name], resp.FinalizedFeaturesEpoch)
	}
	return exitOK
}
