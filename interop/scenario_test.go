package interop

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// The client-neutral scenario of issue 8. Every client drives the same
// steps through a small adapter (admin); the steps only look at what the
// adapter reports, so a step that passes for one client and fails for
// another points at that client's view of kraftd, not at the scenario.

// step names one check of the scenario; the order of steps is the order of
// the table columns.
type step string

const (
	stepListBrokers      step = "list brokers"
	stepController       step = "controller"
	stepCreateTopic      step = "create topic"
	stepLeadersSpread    step = "leaders spread"
	stepDescribeCluster  step = "describe cluster"
	stepCreatePartitions step = "create partitions"
	stepErrTopicExists   step = "err: topic exists"
	stepErrReplication   step = "err: replication factor"
	stepErrUnknownTopic  step = "err: unknown topic"
	stepDeleteTopic      step = "delete topic"
)

var scenarioSteps = []step{stepListBrokers, stepController, stepCreateTopic, stepLeadersSpread,
	stepDescribeCluster, stepCreatePartitions, stepErrTopicExists, stepErrReplication,
	stepErrUnknownTopic, stepDeleteTopic}

// Step outcomes as the table prints them.
const (
	outcomePass    = "pass"
	outcomeFail    = "FAIL"
	outcomeNA      = "n/a"
	outcomeSkipped = "skipped"
)

// errUnsupported is what an adapter returns for an operation its client
// cannot do at all (kcat has no admin API); the step is then "n/a" and the
// scenario performs the operation with franz-go so the later steps still
// have something to look at.
var errUnsupported = errors.New("interop: operation not supported by this client")

// clusterView is a client's answer to "describe the cluster".
type clusterView struct {
	clusterID    string
	brokers      []int32 // sorted
	controllerID int32
}

// admin is what the scenario needs from a client. Every error that carries
// a Kafka error code must wrap the matching *kerr.Error (see kafkaError), so
// the scenario can compare codes without knowing the client's error types.
type admin interface {
	// brokers is the sorted broker ids and the controller id the client
	// learned from the cluster's metadata.
	brokers(ctx context.Context) (ids []int32, controllerID int32, err error)
	createTopic(ctx context.Context, topic string, partitions int32, replicationFactor int16) error
	// leaders lists every topic (no names in the request, so nothing can be
	// auto-created) and returns topic's partition -> leader, or
	// errTopicAbsent when the listing does not have it.
	leaders(ctx context.Context, topic string) (map[int32]int32, error)
	describeCluster(ctx context.Context) (clusterView, error)
	createPartitions(ctx context.Context, topic string, total int32) error
	deleteTopic(ctx context.Context, topic string) error
}

var errTopicAbsent = errors.New("interop: topic not listed")

// kafkaError wraps err so that errors.Is(err, kerr.ErrorForCode(code))
// holds, keeping the client's own message.
func kafkaError(code int16, err error) error {
	if code == 0 {
		return nil
	}
	return fmt.Errorf("%w (client said: %v)", kerr.ErrorForCode(code), err)
}

// scenarioEnv is what the scenario knows about the cluster under test.
type scenarioEnv struct {
	clusterID string
	brokerIDs []int32 // sorted
	helper    admin   // franz-go, for operations a client cannot do
	timeout   time.Duration
}

// reporter is the part of *testing.T the scenario reports through (a fake
// in the scenario's self-test).
type reporter interface {
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
}

// scenarioRun records one client's outcomes.
type scenarioRun struct {
	t        reporter
	env      scenarioEnv
	cl       admin
	topic    string
	outcomes map[step]string
}

// runScenario runs every step against cl and returns the outcome per step.
// A failing step fails the test but the later steps still run, so the table
// shows everything that works.
func runScenario(t reporter, env scenarioEnv, client string, cl admin) map[step]string {
	r := &scenarioRun{t: t, env: env, cl: cl, topic: "scenario-" + client, outcomes: map[step]string{}}
	checks := map[step]func(context.Context) error{
		stepListBrokers:      r.listBrokers,
		stepController:       r.controller,
		stepCreateTopic:      r.createTopic,
		stepLeadersSpread:    r.leadersSpread,
		stepDescribeCluster:  r.describeCluster,
		stepCreatePartitions: r.createPartitions,
		stepErrTopicExists:   r.errTopicExists,
		stepErrReplication:   r.errReplication,
		stepErrUnknownTopic:  r.errUnknownTopic,
		stepDeleteTopic:      r.deleteTopic,
	}
	for _, s := range scenarioSteps { // the steps build on each other: in order
		r.run(s, checks[s])
	}
	return r.outcomes
}

func (r *scenarioRun) run(s step, fn func(ctx context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), r.env.timeout)
	defer cancel()
	start := time.Now()
	err := fn(ctx)
	switch {
	case err == nil:
		r.outcomes[s] = outcomePass
		r.t.Logf("%s: pass in %v", s, time.Since(start).Round(time.Millisecond))
	case errors.Is(err, errUnsupported):
		r.outcomes[s] = outcomeNA
		r.t.Logf("%s: n/a: %v", s, err)
	default:
		r.outcomes[s] = outcomeFail
		r.t.Errorf("%s: %v", s, err)
	}
}

// mutate runs op with the client, or with the franz-go helper when the
// client cannot; it returns errUnsupported in that case so the step shows
// n/a, unless the helper failed too.
func (r *scenarioRun) mutate(op func(admin) error) error {
	err := op(r.cl)
	if !errors.Is(err, errUnsupported) {
		return err
	}
	if herr := op(r.env.helper); herr != nil {
		return fmt.Errorf("franz-go helper: %w", herr)
	}
	return err
}

func (r *scenarioRun) listBrokers(ctx context.Context) error {
	ids, _, err := r.cl.brokers(ctx)
	if err != nil {
		return err
	}
	if !slices.Equal(ids, r.env.brokerIDs) {
		return fmt.Errorf("brokers %v, want %v", ids, r.env.brokerIDs)
	}
	return nil
}

// controller: a KRaft broker names a random alive broker as the controller
// (clients send admin requests there and it forwards them), never a
// controller node, which clients cannot reach.
func (r *scenarioRun) controller(ctx context.Context) error {
	_, id, err := r.cl.brokers(ctx)
	if err != nil {
		return err
	}
	if !slices.Contains(r.env.brokerIDs, id) {
		return fmt.Errorf("controller id %d is not one of the brokers %v", id, r.env.brokerIDs)
	}
	return nil
}

const (
	scenarioPartitions  = 6
	scenarioGrownTo     = 9
	scenarioReplication = 3
)

func (r *scenarioRun) createTopic(ctx context.Context) error {
	return r.mutate(func(a admin) error {
		return a.createTopic(ctx, r.topic, scenarioPartitions, scenarioReplication)
	})
}

// waitLeaders polls the client's topic listing until topic has want
// partitions, each with a leader.
func (r *scenarioRun) waitLeaders(ctx context.Context, want int) (map[int32]int32, error) {
	var last map[int32]int32
	var lastErr error
	for {
		last, lastErr = r.cl.leaders(ctx, r.topic)
		if lastErr == nil && len(last) == want && allLed(last) {
			return last, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("topic %s: want %d led partitions, last saw %v (err %v)", r.topic, want, last, lastErr)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func allLed(leaders map[int32]int32) bool {
	for _, l := range leaders {
		if l < 0 {
			return false
		}
	}
	return true
}

func (r *scenarioRun) leadersSpread(ctx context.Context) error {
	leaders, err := r.waitLeaders(ctx, scenarioPartitions)
	if err != nil {
		return err
	}
	seen := map[int32]bool{}
	for _, l := range leaders {
		seen[l] = true
	}
	if len(seen) != len(r.env.brokerIDs) {
		return fmt.Errorf("leaders %v do not cover every broker %v", leaders, r.env.brokerIDs)
	}
	return nil
}

func (r *scenarioRun) describeCluster(ctx context.Context) error {
	v, err := r.cl.describeCluster(ctx)
	if err != nil {
		return err
	}
	if v.clusterID != r.env.clusterID {
		return fmt.Errorf("cluster id %q, want %q", v.clusterID, r.env.clusterID)
	}
	if !slices.Equal(v.brokers, r.env.brokerIDs) {
		return fmt.Errorf("brokers %v, want %v", v.brokers, r.env.brokerIDs)
	}
	if !slices.Contains(r.env.brokerIDs, v.controllerID) {
		return fmt.Errorf("controller %d is not a broker", v.controllerID)
	}
	return nil
}

func (r *scenarioRun) createPartitions(ctx context.Context) error {
	err := r.mutate(func(a admin) error { return a.createPartitions(ctx, r.topic, scenarioGrownTo) })
	if err != nil && !errors.Is(err, errUnsupported) {
		return err
	}
	if _, werr := r.waitLeaders(ctx, scenarioGrownTo); werr != nil {
		return werr
	}
	return err
}

// expectCode checks that err carries want (see kafkaError); errUnsupported
// passes through so the step shows n/a.
func expectCode(err error, want *kerr.Error) error {
	switch {
	case errors.Is(err, errUnsupported):
		return err
	case err == nil:
		return fmt.Errorf("no error, want %s", want.Message)
	case !errors.Is(err, want):
		return fmt.Errorf("error %v, want %s", err, want.Message)
	}
	return nil
}

func (r *scenarioRun) errTopicExists(ctx context.Context) error {
	return expectCode(r.cl.createTopic(ctx, r.topic, 1, 1), kerr.TopicAlreadyExists)
}

func (r *scenarioRun) errReplication(ctx context.Context) error {
	// One more replica than there are brokers.
	rf := int16(len(r.env.brokerIDs) + 1)
	return expectCode(r.cl.createTopic(ctx, r.topic+"-overreplicated", 1, rf), kerr.InvalidReplicationFactor)
}

func (r *scenarioRun) errUnknownTopic(ctx context.Context) error {
	return expectCode(r.cl.deleteTopic(ctx, r.topic+"-never-created"), kerr.UnknownTopicOrPartition)
}

func (r *scenarioRun) deleteTopic(ctx context.Context) error {
	err := r.mutate(func(a admin) error { return a.deleteTopic(ctx, r.topic) })
	if err != nil && !errors.Is(err, errUnsupported) {
		return err
	}
	for {
		_, lerr := r.cl.leaders(ctx, r.topic)
		if errors.Is(lerr, errTopicAbsent) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topic %s still listed after delete (last err %v)", r.topic, lerr)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// resultTable collects client x step outcomes for the printed table.
type resultTable struct {
	mu   sync.Mutex
	rows map[string]map[step]string
}

func (rt *resultTable) record(client string, outcomes map[step]string) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.rows == nil {
		rt.rows = map[string]map[step]string{}
	}
	rt.rows[client] = outcomes
}

// markdown renders the table with one row per client in order; a step a
// client did not reach (skipped test) prints as "skipped".
func (rt *resultTable) markdown(clients []string, mode string) string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	var b strings.Builder
	b.WriteString("| client | mode |")
	for _, s := range scenarioSteps {
		fmt.Fprintf(&b, " %s |", s)
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", len(scenarioSteps)) + "\n")
	for _, cl := range clients {
		fmt.Fprintf(&b, "| %s | %s |", cl, mode)
		for _, s := range scenarioSteps {
			o := rt.rows[cl][s]
			if o == "" {
				o = outcomeSkipped
			}
			fmt.Fprintf(&b, " %s |", o)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// scenarioClient is one client's subtest: newAdmin builds its adapter (or
// skips the subtest when the client is not installed).
type scenarioClient struct {
	name     string
	newAdmin func(t *testing.T, c *cluster) admin
}

var scenarioClients = []scenarioClient{
	{"franz-go", newFranzAdmin},
	{"sarama", newSaramaAdmin},
	{"sarama (default Config.Version)", newSaramaDefaultAdmin},
	{"sarama (MaxVersion)", newSaramaMaxAdmin},
	{"kafka-go", newKafkaGoAdmin},
	{"kcat (librdkafka)", newKcatAdmin},
	{"kafka-python", newPythonAdmin},
}

// TestClientScenarios runs the scenario with every client against one
// shared KRaft cluster (3 controllers, 3 brokers): each client works on its
// own topic, so the runs do not disturb each other. The client x step table
// is logged at the end and, when KRAFTD_INTEROP_TABLE names a file, written
// there as markdown (the README's table comes from it).
func TestClientScenarios(t *testing.T) {
	c := newCluster(t, Controllers(3), Brokers(3))
	waitRunning(t, c)
	env := scenarioEnv{clusterID: c.clusterID, helper: newFranzAdmin(t, c), timeout: 15 * time.Second}
	for nid := range c.brokerPorts {
		env.brokerIDs = append(env.brokerIDs, nid)
	}
	slices.Sort(env.brokerIDs)
	waitFor(t, "every broker to list all brokers", 10*time.Second, func() bool {
		for nid := range c.brokerPorts {
			if !slices.Equal(listBrokers(c.brokerAddr(nid)), env.brokerIDs) {
				return false
			}
		}
		return true
	})

	var table resultTable
	var names []string
	for _, sc := range scenarioClients {
		names = append(names, sc.name)
		t.Run(sc.name, func(t *testing.T) {
			table.record(sc.name, runScenario(t, env, clientSlug(sc.name), sc.newAdmin(t, c)))
		})
	}
	md := table.markdown(names, "KRaft")
	t.Logf("client x step (KRaft):\n%s", md)
	if path := os.Getenv("KRAFTD_INTEROP_TABLE"); path != "" {
		if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
			t.Errorf("writing the table: %v", err)
		}
	}
}

// clientSlug makes a client name usable in a topic name: lower case,
// runs of anything but letters and digits become one '-'.
func clientSlug(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.TrimSuffix(b.String(), "-")
}
