package app

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// ephemeralConfig is a combined node on 127.0.0.1 with kernel-chosen ports, a
// fresh data directory and the test cluster id, plus extra settings.
func ephemeralConfig(t *testing.T, extra ...Setting) Config {
	t.Helper()
	return embedded(t, append([]Setting{
		{"listeners", "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0"},
		{"log.dirs", t.TempDir()},
		{"cluster.id", testClusterID}}, extra...)...)
}

// apiVersions sends ApiVersions v3 and returns the decoded response.
func apiVersions(t *testing.T, addr net.Addr) *kmsg.ApiVersionsResponse {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr.String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "kraftd-test", "0"
	clientID := "test"
	body := req.AppendTo(nil)
	// Request header v2: key, version, correlation id, client id, no tags.
	hdr := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
	hdr = binary.BigEndian.AppendUint16(hdr, uint16(req.Version))
	hdr = binary.BigEndian.AppendUint32(hdr, 42)
	hdr = binary.BigEndian.AppendUint16(hdr, uint16(len(clientID)))
	hdr = append(hdr, clientID...)
	hdr = append(hdr, 0)
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(hdr)+len(body)))
	if _, err := conn.Write(append(append(frame, hdr...), body...)); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	var size, corr int32
	if err := binary.Read(r, binary.BigEndian, &size); err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, size)
	if _, err := io.ReadFull(r, payload); err != nil {
		t.Fatal(err)
	}
	corr = int32(binary.BigEndian.Uint32(payload))
	if corr != 42 {
		t.Fatalf("correlation id %d, want 42", corr)
	}
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.Version = req.Version
	// ApiVersions responses always use header v0: no tagged fields.
	if err := resp.ReadFrom(payload[4:]); err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestAppServesApiVersionsOnEveryListener(t *testing.T) {
	a, err := New(ephemeralConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if a.Registry("PLAINTEXT") == nil || a.Registry("CONTROLLER") == nil || a.Registry("NOPE") != nil {
		t.Fatal("registries not one per listener")
	}
	if a.Registry("PLAINTEXT") == a.Registry("CONTROLLER") {
		t.Fatal("listeners share a registry")
	}
	ctx := t.Context()
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if a.ClusterID() != testClusterID {
		t.Errorf("ClusterID = %q", a.ClusterID())
	}
	for _, l := range []string{"PLAINTEXT", "CONTROLLER"} {
		resp := apiVersions(t, a.Addr(l))
		if resp.ErrorCode != 0 || !slices.ContainsFunc(resp.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool {
			return k.ApiKey == 18
		}) {
			t.Errorf("%s: error %d keys %+v", l, resp.ErrorCode, resp.ApiKeys)
		}
	}
	if err := a.Start(ctx); !errors.Is(err, ErrAppState) {
		t.Errorf("second Start: %v", err)
	}
	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Stop(ctx); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	cfg := a.Config()
	if _, err := ReadMetaProperties(cfg.MetadataDir()); err != nil {
		t.Errorf("storage not formatted on start: %v", err)
	}
}

type recorder struct {
	mu   sync.Mutex
	log  []string
	fail string
}

func (r *recorder) component(name string) Component { return &fakeComponent{name: name, r: r} }

func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, s)
}

type fakeComponent struct {
	name string
	r    *recorder
}

func (f *fakeComponent) Start(context.Context) error {
	if f.r.fail == f.name {
		return errors.New("boom")
	}
	f.r.add("start " + f.name)
	return nil
}

func (f *fakeComponent) Stop(context.Context) error { f.r.add("stop " + f.name); return nil }

func TestAppComponentOrder(t *testing.T) {
	r := &recorder{}
	a, err := New(ephemeralConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"quorum", "controller", "broker"} {
		if err := a.AddComponent(n, r.component(n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := a.AddComponent("late", r.component("late")); !errors.Is(err, ErrAppState) {
		t.Errorf("late AddComponent: %v", err)
	}
	if err := a.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := []string{"start quorum", "start controller", "start broker", "stop broker", "stop controller", "stop quorum"}
	if !slices.Equal(r.log, want) {
		t.Errorf("order %v, want %v", r.log, want)
	}
}

func TestAppStartFailureUnwinds(t *testing.T) {
	r := &recorder{fail: "broker"}
	a, err := New(ephemeralConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"quorum", "broker"} {
		if err := a.AddComponent(n, r.component(n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Start(t.Context()); err == nil {
		t.Fatal("Start succeeded with a failing component")
	}
	if !slices.Equal(r.log, []string{"start quorum", "stop quorum"}) {
		t.Errorf("log %v", r.log)
	}
	if a.Addr("PLAINTEXT") != nil {
		t.Error("listener bound although Start failed")
	}
	if err := a.Stop(t.Context()); err != nil {
		t.Errorf("Stop after failed Start: %v", err)
	}
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	c := ephemeralConfig(t)
	c.NodeID = -1
	if _, err := New(c); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("New: %v", err)
	}
}

func TestAppServesMetrics(t *testing.T) {
	c := ephemeralConfig(t)
	c.MetricsListener = "127.0.0.1:0"
	a, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer a.Stop(t.Context())
	resp, err := http.Get("http://" + a.MetricsAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "go_goroutines") {
		t.Fatalf("status %d err %v body %.200s", resp.StatusCode, err, body)
	}
	if err := a.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
}
