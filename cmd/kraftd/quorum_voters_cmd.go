package main

// kraftd quorum add-controller / remove-controller: what kafka-metadata-quorum.sh's
// commands of the same names do (KIP-853), over the Kafka wire: AddRaftVoter and
// RemoveRaftVoter sent to the quorum leader, found with DescribeQuorum from a
// bootstrap controller.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/cmd/kraftd/app"
	"github.com/kraftd/kraftd/protocol"
)

// runAddController adds the controller that --command-config describes (its
// node.id, its advertised controller listeners, and the directory.id of its
// formatted metadata directory) to the voters. Run it on the new controller once it
// runs and has caught up as an observer.
func runAddController(args []string, stdout io.Writer, stderr *os.File) int {
	fs := pflag.NewFlagSet("quorum add-controller", pflag.ContinueOnError)
	bootstrap := bootstrapFlags(fs)
	configFile := fs.String("command-config", "", "the new controller's properties file")
	timeout := fs.Duration("timeout", 30*time.Second, "overall deadline")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return exitOK
		}
		return report(stderr, exitUsage, err)
	}
	if bootstrap() == "" || *configFile == "" {
		fmt.Fprintln(stderr, quorumUsage)
		return exitUsage
	}
	settings, err := app.ReadPropertiesFile(*configFile)
	if err != nil {
		return report(stderr, exitError, err)
	}
	cfg, err := app.LoadConfig(settings)
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		return report(stderr, exitError, err)
	}
	if !cfg.HasRole(app.RoleController) {
		return report(stderr, exitError, fmt.Errorf("%s: process.roles has no controller", *configFile))
	}
	dir, err := app.MetadataDirectoryID(&cfg)
	if err == nil && dir == app.ZeroUUID {
		err = fmt.Errorf("%s has no directory.id; format it with kraftd storage format --no-initial-controllers", cfg.MetadataDir())
	}
	if err != nil {
		return report(stderr, exitError, err)
	}
	req := kmsg.NewPtrAddRaftVoterRequest()
	req.TimeoutMillis = int32(timeout.Milliseconds())
	req.VoterID, req.VoterDirectoryID, req.AckWhenCommitted = cfg.NodeID, dir, true
	for _, e := range app.AdvertisedControllerEndpoints(&cfg) {
		req.Listeners = append(req.Listeners, kmsg.AddRaftVoterRequestListener{Name: e.Name, Host: e.Host, Port: uint16(e.Port)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := sendVoterChange(ctx, bootstrap(), req); err != nil {
		return report(stderr, exitError, err)
	}
	fmt.Fprintf(stdout, "Added controller %d with directory id %s and endpoints: %s\n", cfg.NodeID, dir,
		joinListeners(req.Listeners))
	return exitOK
}

// runRemoveController removes the voter --controller-id/--controller-directory-id.
func runRemoveController(args []string, stdout io.Writer, stderr *os.File) int {
	fs := pflag.NewFlagSet("quorum remove-controller", pflag.ContinueOnError)
	bootstrap := bootstrapFlags(fs)
	id := fs.Int32("controller-id", -1, "the id of the controller to remove")
	dirText := fs.String("controller-directory-id", "", "the directory id of the controller to remove")
	timeout := fs.Duration("timeout", 30*time.Second, "overall deadline")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return exitOK
		}
		return report(stderr, exitUsage, err)
	}
	if bootstrap() == "" || *id < 0 || *dirText == "" {
		fmt.Fprintln(stderr, quorumUsage)
		return exitUsage
	}
	dir, err := app.ParseUUID(*dirText)
	if err != nil {
		return report(stderr, exitUsage, err)
	}
	req := kmsg.NewPtrRemoveRaftVoterRequest()
	req.VoterID, req.VoterDirectoryID = *id, dir
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := sendVoterChange(ctx, bootstrap(), req); err != nil {
		return report(stderr, exitError, err)
	}
	fmt.Fprintf(stdout, "Removed controller %d with directory id %s\n", *id, dir)
	return exitOK
}

// bootstrapFlags registers --bootstrap-controller and --bootstrap-server (a broker,
// which forwards DescribeQuorum, AddRaftVoter, RemoveRaftVoter and UpdateFeatures to
// the active controller, as Kafka's do) and returns the address given.
func bootstrapFlags(fs *pflag.FlagSet) func() string {
	controller := fs.String("bootstrap-controller", "", "host:port of a controller of the quorum")
	server := fs.String("bootstrap-server", "", "host:port of a broker, which forwards the requests to the active controller")
	return func() string {
		if *controller != "" {
			return *controller
		}
		return *server
	}
}

// sendVoterChange sends req to the quorum leader, found through bootstrap, and asks
// again while the leader answers REQUEST_TIMED_OUT (a new controller that has not
// caught up yet, or a previous change not yet committed) until ctx ends.
func sendVoterChange(ctx context.Context, bootstrap string, req kmsg.Request) error {
	cl := protocol.NewClient(protocol.ClientConfig{ClientID: "kraftd-quorum"})
	defer cl.Close()
	for {
		q, err := describeQuorum(ctx, cl, bootstrap)
		if err != nil {
			return err
		}
		resp, err := cl.Request(ctx, q.addr, req)
		if err != nil {
			return err
		}
		var code int16
		var msg *string
		switch r := resp.(type) {
		case *kmsg.AddRaftVoterResponse:
			code, msg = r.ErrorCode, r.ErrorMessage
		case *kmsg.RemoveRaftVoterResponse:
			code, msg = r.ErrorCode, r.ErrorMessage
		}
		if code == 0 {
			return nil
		}
		kerrErr := kerr.ErrorForCode(code)
		if msg != nil {
			kerrErr = fmt.Errorf("%w: %s", kerrErr, *msg)
		}
		if code != kerr.RequestTimedOut.Code && code != kerr.NotLeaderForPartition.Code {
			return kerrErr
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last answer: %v)", ctx.Err(), kerrErr)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func joinListeners(ls []kmsg.AddRaftVoterRequestListener) string {
	out := ""
	for i, l := range ls {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%s://%s:%d", l.Name, l.Host, l.Port)
	}
	return out
}
