package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/kraftd/kraftd/legacyzk"
	"github.com/kraftd/kraftd/protocol"
)

// ErrDivergenceCheck is a divergence check that could not run (no broker
// reachable, ZooKeeper unreachable, a legacy cluster without
// zookeeper.connect).
var ErrDivergenceCheck = errors.New("check-divergence: cannot check")

// DivergenceConfig configures CheckDivergence.
type DivergenceConfig struct {
	// Bootstrap are broker addresses (host:port). KRaft: every broker they
	// list is checked. zk-legacy: every broker registered in ZooKeeper is
	// checked, and Bootstrap only tells the modes apart when
	// ZooKeeperConnect is empty.
	Bootstrap []string
	// ZooKeeperConnect is zookeeper.connect of a zk-legacy cluster, whose
	// source of truth is ZooKeeper. Empty: a KRaft cluster, whose truth is
	// the committed metadata log.
	ZooKeeperConnect string
	// ControllerAdmin are zk-legacy brokers' metrics.listener addresses
	// (host:port) serving GET /controller/view (brokers started with
	// kraftd.fault.injection.enable): the active controller's in-memory
	// partition states are compared with ZooKeeper too, the divergence
	// case where ZooKeeper and the controller disagree.
	ControllerAdmin []string
	// Rounds is how many times a difference must be seen in a row, SettleMs
	// apart, before it counts (default 3, 200 ms): a change being pushed or
	// applied while the check reads is not a divergence.
	Rounds   int
	SettleMs int
	// TimeoutMs bounds each request (default 5000).
	TimeoutMs int
	Logger    *zap.Logger
}

// BrokerCheck is the verdict on one broker.
type BrokerCheck struct {
	ID   int32
	Addr string
	// Status is "in sync", "behind at offset N" (KRaft: a committed prefix
	// of the log, older than the high watermark; never a divergence),
	// "divergent" or "unreachable".
	Status string
	// Differences name each difference in a sentence starting "broker N:".
	Differences []string
}

// DivergenceReport is the outcome of CheckDivergence.
type DivergenceReport struct {
	Mode Mode
	// Truth describes the source of truth: "ZooKeeper at ..." or
	// "metadata log high watermark N".
	Truth   string
	Brokers []BrokerCheck
	// Controller is the zk-legacy active controller's view compared with
	// ZooKeeper (nil unless ControllerAdmin was given); its ID is the
	// controller's broker id and Addr its admin address.
	Controller *BrokerCheck
}

// Divergent reports whether any broker, or the controller, disagrees with
// the truth.
func (r *DivergenceReport) Divergent() bool {
	return slices.ContainsFunc(r.Brokers, func(b BrokerCheck) bool { return len(b.Differences) > 0 }) ||
		(r.Controller != nil && len(r.Controller.Differences) > 0)
}

// CheckDivergence compares every broker's view with the source of truth.
//
// zk-legacy: ZooKeeper is the truth. Each broker registered in
// /brokers/ids answers a Metadata request for all topics, compared with
// every topic, assignment and partition state in ZooKeeper
// (legacyzk.Truth.CompareMetadata).
//
// KRaft: the committed __cluster_metadata log is the truth, and a broker's
// image is always a committed prefix of it. The check asks the quorum for
// its high watermark (DescribeQuorum, forwarded by a broker) and every
// broker for the offset its image reflects: ApiVersions v3+
// FinalizedFeaturesEpoch, which KRaft brokers (Kafka's and kraftd's) set to
// the offset of the published image. Brokers at the same offset have
// replayed the same prefix, so their Metadata answers must be equal; any
// difference among them is a divergence. A broker at a lower offset is
// reported as "behind at offset N" and never compared with the others.
func CheckDivergence(ctx context.Context, cfg DivergenceConfig) (*DivergenceReport, error) {
	cfg.defaults()
	cl := protocol.NewClient(protocol.ClientConfig{ClientID: "kraftd-check-divergence",
		DialTimeout: time.Duration(cfg.TimeoutMs) * time.Millisecond, Logger: cfg.Logger})
	defer cl.Close()
	chk := &divergenceCheck{cfg: cfg, cl: cl}
	if cfg.ZooKeeperConnect != "" {
		return chk.legacy(ctx)
	}
	legacy, err := chk.isLegacy(ctx)
	if err != nil {
		return nil, err
	}
	if legacy {
		return nil, fmt.Errorf("%w: the brokers serve LeaderAndIsr (zk-legacy mode); give --zookeeper-connect", ErrDivergenceCheck)
	}
	return chk.kraft(ctx)
}

func (c *DivergenceConfig) defaults() {
	if c.Rounds <= 0 {
		c.Rounds = 3
	}
	if c.SettleMs <= 0 {
		c.SettleMs = 200
	}
	if c.TimeoutMs <= 0 {
		c.TimeoutMs = 5000
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
}

// divergenceCheck holds one run's client.
type divergenceCheck struct {
	cfg DivergenceConfig
	cl  *protocol.Client
}

// request sends req to addr with the per-request timeout.
func (c *divergenceCheck) request(ctx context.Context, addr string, req kmsg.Request) (kmsg.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(c.cfg.TimeoutMs)*time.Millisecond)
	defer cancel()
	return c.cl.Request(ctx, addr, req)
}

// isLegacy reports whether the first reachable bootstrap broker serves
// the controller-to-broker push APIs (LeaderAndIsr, key 4), which only
// ZooKeeper-era brokers do.
func (c *divergenceCheck) isLegacy(ctx context.Context) (bool, error) {
	var errs []error
	for _, addr := range c.cfg.Bootstrap {
		ctx, cancel := context.WithTimeout(ctx, time.Duration(c.cfg.TimeoutMs)*time.Millisecond)
		versions, err := c.cl.PeerVersions(ctx, addr)
		cancel()
		if err == nil {
			_, ok := versions[4]
			return ok, nil
		}
		errs = append(errs, err)
	}
	return false, fmt.Errorf("%w: no bootstrap broker reachable: %w", ErrDivergenceCheck, errors.Join(errs...))
}

// metadata asks addr for every topic (v12: topic ids, and what both modes
// serve).
func (c *divergenceCheck) metadata(ctx context.Context, addr string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	resp, err := c.request(ctx, addr, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.MetadataResponse), nil
}

// settle runs round until it reports no difference or Rounds ran, pausing
// SettleMs between rounds, and returns the last round's differences.
func (c *divergenceCheck) settle(ctx context.Context, round func() ([]string, error)) ([]string, error) {
	var diffs []string
	for i := range c.cfg.Rounds {
		if i > 0 {
			t := time.NewTimer(time.Duration(c.cfg.SettleMs) * time.Millisecond)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			}
		}
		var err error
		if diffs, err = round(); err != nil || len(diffs) == 0 {
			return diffs, err
		}
	}
	return diffs, nil
}

// legacy checks every registered broker against ZooKeeper.
func (c *divergenceCheck) legacy(ctx context.Context) (*DivergenceReport, error) {
	st, err := legacyzk.DialZk(ctx, legacyzk.ZkConfig{Connect: c.cfg.ZooKeeperConnect,
		ConnectTimeoutMs: c.cfg.TimeoutMs, Logger: c.cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("%w: ZooKeeper: %w", ErrDivergenceCheck, err)
	}
	defer st.Close()
	rep := &DivergenceReport{Mode: ModeZKLegacy, Truth: "ZooKeeper at " + c.cfg.ZooKeeperConnect}
	brokers, err := legacyBrokers(ctx, st)
	if err != nil {
		return nil, fmt.Errorf("%w: reading /brokers/ids: %w", ErrDivergenceCheck, err)
	}
	for _, b := range brokers {
		bc := BrokerCheck{ID: b.id, Addr: b.addr, Status: "in sync"}
		diffs, err := c.settle(ctx, func() ([]string, error) {
			tr, err := legacyzk.ReadTruth(ctx, st)
			if err != nil {
				return nil, fmt.Errorf("%w: reading ZooKeeper: %w", ErrDivergenceCheck, err)
			}
			m, err := c.metadata(ctx, b.addr)
			if err != nil {
				return nil, err
			}
			return tr.CompareMetadata(b.id, m), nil
		})
		switch {
		case errors.Is(err, ErrDivergenceCheck):
			return nil, err
		case err != nil:
			bc.Status = "unreachable"
		case len(diffs) > 0:
			bc.Status, bc.Differences = "divergent", diffs
		}
		rep.Brokers = append(rep.Brokers, bc)
	}
	if len(c.cfg.ControllerAdmin) > 0 {
		cc, err := c.controllerCheck(ctx, st)
		if err != nil {
			return nil, err
		}
		rep.Controller = cc
	}
	return rep, nil
}

// controllerCheck finds the active controller among the ControllerAdmin
// addresses and compares its view with ZooKeeper.
func (c *divergenceCheck) controllerCheck(ctx context.Context, st legacyzk.Store) (*BrokerCheck, error) {
	hc := &http.Client{Timeout: time.Duration(c.cfg.TimeoutMs) * time.Millisecond}
	var cc *BrokerCheck
	diffs, err := c.settle(ctx, func() ([]string, error) {
		cc = nil
		for _, addr := range c.cfg.ControllerAdmin {
			v, ok, err := fetchControllerView(ctx, hc, addr)
			if err != nil || !ok {
				continue
			}
			tr, err := legacyzk.ReadTruth(ctx, st)
			if err != nil {
				return nil, fmt.Errorf("%w: reading ZooKeeper: %w", ErrDivergenceCheck, err)
			}
			cc = &BrokerCheck{ID: v.BrokerID, Addr: addr, Status: "in sync"}
			return tr.CompareController(v), nil
		}
		return []string{"no active controller among --controller-admin " + strings.Join(c.cfg.ControllerAdmin, ",")}, nil
	})
	if err != nil {
		return nil, err
	}
	if cc == nil {
		return &BrokerCheck{ID: -1, Status: "unreachable", Differences: diffs}, nil
	}
	if len(diffs) > 0 {
		cc.Status, cc.Differences = "divergent", diffs
	}
	return cc, nil
}

// maxViewBytes caps a /controller/view answer (about 100 bytes a
// partition: 1M partitions fit).
const maxViewBytes = 256 << 20

// fetchControllerView GETs addr's /controller/view; ok=false when addr's
// broker is not the active controller (404).
func fetchControllerView(ctx context.Context, hc *http.Client, addr string) (legacyzk.ControllerView, bool, error) {
	var v legacyzk.ControllerView
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/controller/view", nil)
	if err != nil {
		return v, false, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return v, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return v, false, nil
	}
	if resp.StatusCode != http.StatusOK {
		return v, false, fmt.Errorf("GET %s/controller/view: %s", addr, resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxViewBytes)).Decode(&v); err != nil {
		return v, false, err
	}
	return v, true, nil
}

type brokerAddr struct {
	id   int32
	addr string
}

// legacyBrokers lists the registered brokers with the address of their
// first endpoint (kraftd's legacy brokers register one).
func legacyBrokers(ctx context.Context, st legacyzk.Store) ([]brokerAddr, error) {
	kids, err := st.Children(ctx, legacyzk.BrokerIDsPath, false)
	if err != nil {
		return nil, err
	}
	var out []brokerAddr
	for _, k := range kids {
		id, err := strconv.ParseInt(k, 10, 32)
		if err != nil {
			continue
		}
		data, _, err := st.Get(ctx, legacyzk.BrokerPath(int32(id)), false)
		if errors.Is(err, legacyzk.ErrNoNode) {
			continue // gone meanwhile
		}
		if err != nil {
			return nil, err
		}
		info, err := legacyzk.DecodeBroker(int32(id), data)
		if err != nil || len(info.Endpoints) == 0 {
			continue
		}
		ep := info.Endpoints[0]
		out = append(out, brokerAddr{int32(id), net.JoinHostPort(ep.Host, strconv.Itoa(int(ep.Port)))})
	}
	slices.SortFunc(out, func(a, b brokerAddr) int { return int(a.id - b.id) })
	return out, nil
}

// kraft checks the brokers of a KRaft cluster against the committed log.
func (c *divergenceCheck) kraft(ctx context.Context) (*DivergenceReport, error) {
	brokers, err := c.kraftBrokers(ctx)
	if err != nil {
		return nil, err
	}
	var hwm int64 = -1
	var last map[int32]*kraftView
	diffs, err := c.settle(ctx, func() ([]string, error) {
		h, err := c.highWatermark(ctx, brokers)
		if err != nil {
			return nil, err
		}
		hwm = h
		last = c.kraftViews(ctx, brokers)
		return compareSameOffset(last), nil
	})
	if err != nil {
		return nil, err
	}
	rep := &DivergenceReport{Mode: ModeKRaft, Truth: fmt.Sprintf("metadata log high watermark %d", hwm),
		Brokers: kraftVerdicts(brokers, last, hwm, diffs)}
	return rep, nil
}

// kraftVerdicts turns the last round into one verdict per broker: missing
// from views is unreachable; a broker whose image offset is below the last
// committed offset (hwm-1) is behind, never divergent, since it was only
// compared with brokers at its own offset; a broker named by a difference
// is divergent.
func kraftVerdicts(brokers []brokerAddr, views map[int32]*kraftView, hwm int64, diffs []string) []BrokerCheck {
	var out []BrokerCheck
	for _, b := range brokers {
		v := views[b.id]
		bc := BrokerCheck{ID: b.id, Addr: b.addr, Status: "in sync"}
		switch {
		case v == nil:
			bc.Status = "unreachable"
		case v.offset < hwm-1:
			bc.Status = fmt.Sprintf("behind at offset %d", v.offset)
		}
		for _, d := range diffs {
			if strings.HasPrefix(d, fmt.Sprintf("broker %d:", b.id)) {
				bc.Status = "divergent"
				bc.Differences = append(bc.Differences, d)
			}
		}
		out = append(out, bc)
	}
	return out
}

// kraftBrokers is every broker listed by any reachable bootstrap broker:
// DescribeCluster v2 with IncludeFencedBrokers (KIP-1073), so a fenced
// broker, which Metadata hides from clients, is checked too; Metadata
// where DescribeCluster v2 is not served.
func (c *divergenceCheck) kraftBrokers(ctx context.Context) ([]brokerAddr, error) {
	seen := map[int32]string{}
	var errs []error
	for _, addr := range c.cfg.Bootstrap {
		if err := c.listBrokers(ctx, addr, seen); err != nil {
			errs = append(errs, err)
		}
	}
	if len(seen) == 0 {
		return nil, fmt.Errorf("%w: no broker listed by %v: %w", ErrDivergenceCheck, c.cfg.Bootstrap, errors.Join(errs...))
	}
	var out []brokerAddr
	for id, addr := range seen {
		out = append(out, brokerAddr{id, addr})
	}
	slices.SortFunc(out, func(a, b brokerAddr) int { return int(a.id - b.id) })
	return out, nil
}

// listBrokers adds the brokers addr knows to seen.
func (c *divergenceCheck) listBrokers(ctx context.Context, addr string, seen map[int32]string) error {
	req := kmsg.NewPtrDescribeClusterRequest()
	req.SetVersion(2)
	req.EndpointType = 1
	req.IncludeFencedBrokers = true
	if resp, err := c.request(ctx, addr, req); err == nil {
		if dc := resp.(*kmsg.DescribeClusterResponse); dc.ErrorCode == 0 {
			for _, b := range dc.Brokers {
				seen[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
			}
			return nil
		}
	}
	m, err := c.metadata(ctx, addr)
	if err != nil {
		return err
	}
	for _, b := range m.Brokers {
		seen[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	return nil
}

// highWatermark asks the quorum (through any broker) for the
// __cluster_metadata high watermark.
func (c *divergenceCheck) highWatermark(ctx context.Context, brokers []brokerAddr) (int64, error) {
	var errs []error
	for _, b := range brokers {
		req := kmsg.NewPtrDescribeQuorumRequest()
		req.SetVersion(-1)
		t := kmsg.NewDescribeQuorumRequestTopic()
		t.Topic = "__cluster_metadata"
		t.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}
		req.Topics = append(req.Topics, t)
		resp, err := c.request(ctx, b.addr, req)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		dq := resp.(*kmsg.DescribeQuorumResponse)
		if err := kerr.ErrorForCode(dq.ErrorCode); err != nil {
			errs = append(errs, err)
			continue
		}
		if len(dq.Topics) == 1 && len(dq.Topics[0].Partitions) == 1 {
			p := dq.Topics[0].Partitions[0]
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				errs = append(errs, err)
				continue
			}
			return p.HighWatermark, nil
		}
		errs = append(errs, errors.New("DescribeQuorum answer without __cluster_metadata-0"))
	}
	return -1, fmt.Errorf("%w: DescribeQuorum: %w", ErrDivergenceCheck, errors.Join(errs...))
}

// kraftView is one broker's answer: the offset its image reflects and its
// Metadata. stable is false when the offset moved while Metadata was read
// (the answer may mix nothing, but its offset is unknown).
type kraftView struct {
	id     int32
	offset int64
	meta   *kmsg.MetadataResponse
	stable bool
}

// kraftViews reads each broker's offset, Metadata, and offset again,
// retrying a few times while the broker is applying; unreachable brokers
// are missing from the map.
func (c *divergenceCheck) kraftViews(ctx context.Context, brokers []brokerAddr) map[int32]*kraftView {
	out := map[int32]*kraftView{}
	for _, b := range brokers {
		for range 3 {
			v, err := c.kraftView(ctx, b)
			if err != nil {
				break
			}
			out[b.id] = v
			if v.stable {
				break
			}
		}
	}
	return out
}

func (c *divergenceCheck) kraftView(ctx context.Context, b brokerAddr) (*kraftView, error) {
	before, err := c.imageOffset(ctx, b.addr)
	if err != nil {
		return nil, err
	}
	m, err := c.metadata(ctx, b.addr)
	if err != nil {
		return nil, err
	}
	after, err := c.imageOffset(ctx, b.addr)
	if err != nil {
		return nil, err
	}
	return &kraftView{id: b.id, offset: after, meta: m, stable: before == after}, nil
}

// imageOffset is ApiVersions v3 FinalizedFeaturesEpoch: the offset of the
// broker's published metadata image (-1 before any).
func (c *divergenceCheck) imageOffset(ctx context.Context, addr string) (int64, error) {
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "kraftd-check-divergence", "1"
	resp, err := c.request(ctx, addr, req)
	if err != nil {
		return 0, err
	}
	av := resp.(*kmsg.ApiVersionsResponse)
	if err := kerr.ErrorForCode(av.ErrorCode); err != nil {
		return 0, err
	}
	return av.FinalizedFeaturesEpoch, nil
}

// compareSameOffset compares the Metadata of stable brokers at equal
// offsets, each with the lowest-id broker of its offset.
func compareSameOffset(views map[int32]*kraftView) []string {
	byOffset := map[int64][]*kraftView{}
	for _, v := range views {
		if v.stable {
			byOffset[v.offset] = append(byOffset[v.offset], v)
		}
	}
	var out []string
	for _, group := range byOffset {
		slices.SortFunc(group, func(a, b *kraftView) int { return int(a.id - b.id) })
		ref := renderMetadata(group[0].meta)
		for _, v := range group[1:] {
			out = append(out, diffRendered(v.id, group[0].id, v.offset, renderMetadata(v.meta), ref)...)
		}
	}
	slices.Sort(out)
	return out
}

// renderMetadata flattens a Metadata answer into comparable lines keyed by
// what they describe.
func renderMetadata(m *kmsg.MetadataResponse) map[string]string {
	out := map[string]string{}
	var brokers []string
	for _, b := range m.Brokers {
		rack := ""
		if b.Rack != nil {
			rack = " rack " + *b.Rack
		}
		brokers = append(brokers, fmt.Sprintf("%d@%s:%d%s", b.NodeID, b.Host, b.Port, rack))
	}
	slices.Sort(brokers)
	out["brokers"] = strings.Join(brokers, ",")
	for _, t := range m.Topics {
		if t.Topic == nil {
			continue
		}
		out["topic "+*t.Topic] = fmt.Sprintf("id %x error %d partitions %d", t.TopicID, t.ErrorCode, len(t.Partitions))
		for _, p := range t.Partitions {
			out[fmt.Sprintf("partition %s-%d", *t.Topic, p.Partition)] = fmt.Sprintf(
				"leader %d epoch %d replicas %v isr %v offline %v error %d",
				p.Leader, p.LeaderEpoch, p.Replicas, p.ISR, p.OfflineReplicas, p.ErrorCode)
		}
	}
	return out
}

// diffRendered names every key where got (broker id) and want (broker
// refID, same offset) differ.
func diffRendered(id, refID int32, offset int64, got, want map[string]string) []string {
	var out []string
	keys := map[string]bool{}
	for k := range got {
		keys[k] = true
	}
	for k := range want {
		keys[k] = true
	}
	show := func(v string, ok bool) string {
		if !ok {
			return "nothing"
		}
		return v
	}
	for k := range keys {
		g, gok := got[k]
		w, wok := want[k]
		if gok == wok && g == w {
			continue
		}
		out = append(out, fmt.Sprintf("broker %d: %s: %s, but broker %d at the same offset %d has %s",
			id, k, show(g, gok), refID, offset, show(w, wok)))
	}
	return out
}
