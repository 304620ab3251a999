package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
)

// metricsServer serves GET /metrics for metrics.listener. It owns one
// goroutine (the HTTP serve loop), started by start and waited for by stop.
type metricsServer struct {
	registry *prometheus.Registry
	log      *zap.Logger
	srv      *http.Server
	ln       net.Listener
	wg       sync.WaitGroup
	// extra are more endpoints (pattern -> handler), added by roles before
	// start (zk-legacy: POST /faults).
	extra map[string]http.Handler
	// loopbackOnly names the keys whose endpoints in extra must not be
	// reachable from other hosts; start then refuses a bound address that
	// is not loopback.
	loopbackOnly []string
}

// handle adds an endpoint; it must be called before start.
func (m *metricsServer) handle(pattern string, h http.Handler) {
	if m.extra == nil {
		m.extra = map[string]http.Handler{}
	}
	m.extra[pattern] = h
}

// handleLoopbackOnly adds an endpoint that only local processes may reach
// (legacyzk's fault switches, pprof), served because of the setting key;
// start then refuses a non-loopback address.
func (m *metricsServer) handleLoopbackOnly(key, pattern string, h http.Handler) {
	m.handle(pattern, h)
	if !slices.Contains(m.loopbackOnly, key) {
		m.loopbackOnly = append(m.loopbackOnly, key)
	}
}

// handlePprof serves net/http/pprof's endpoints under /debug/pprof/
// (kraftd.pprof.enable): the index and the named profiles (goroutine,
// heap, ...), cmdline, a CPU profile, symbol and an execution trace.
func (m *metricsServer) handlePprof() {
	const key = "kraftd.pprof.enable"
	m.handleLoopbackOnly(key, "/debug/pprof/", http.HandlerFunc(pprof.Index))
	m.handleLoopbackOnly(key, "/debug/pprof/cmdline", http.HandlerFunc(pprof.Cmdline))
	m.handleLoopbackOnly(key, "/debug/pprof/profile", http.HandlerFunc(pprof.Profile))
	m.handleLoopbackOnly(key, "/debug/pprof/symbol", http.HandlerFunc(pprof.Symbol))
	m.handleLoopbackOnly(key, "/debug/pprof/trace", http.HandlerFunc(pprof.Trace))
}

// newMetrics builds the per-node registry with the Go runtime and process
// collectors. A registry per App (never prometheus.DefaultRegisterer) keeps
// several in-process nodes in one test from colliding.
func newMetrics(log *zap.Logger) *metricsServer {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return &metricsServer{registry: reg, log: log}
}

// start binds addr and serves in a tracked goroutine.
func (m *metricsServer) start(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("app: metrics.listener %s: %w", addr, err)
	}
	if tcp, ok := ln.Addr().(*net.TCPAddr); len(m.loopbackOnly) > 0 && (!ok || !tcp.IP.IsLoopback()) {
		ln.Close()
		return fmt.Errorf("%w: metrics.listener %s bound %s, which is not a loopback address; "+
			"%s serves its endpoints only on loopback", ErrInvalidConfig, addr, ln.Addr(), strings.Join(m.loopbackOnly, " and "))
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{}))
	for pattern, h := range m.extra {
		mux.Handle(pattern, h)
	}
	m.ln = ln
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	m.wg.Go(func() {
		if err := m.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.log.Error("metrics listener failed", zap.Error(err))
		}
	})
	m.log.Info("serving metrics", zap.Stringer("addr", ln.Addr()))
	return nil
}

// stop shuts the HTTP server down and waits for its goroutine.
func (m *metricsServer) stop(ctx context.Context) error {
	if m.srv == nil {
		return nil
	}
	err := m.srv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(fmt.Errorf("app: metrics listener: %w", err), m.srv.Close())
	}
	m.wg.Wait()
	return err
}

// addr is the bound address, nil when not serving.
func (m *metricsServer) addr() net.Addr {
	if m.ln == nil {
		return nil
	}
	return m.ln.Addr()
}

// registerFetchRegionMetrics exports how Fetch record bytes left the broker's
// socket server (protocol.Server.RegionBytes): straight from the segment files
// by sendfile, or copied through a buffer (TLS, non-Linux, or a connection that
// is not plain TCP). bytes is read at each scrape.
func (m *metricsServer) registerFetchRegionMetrics(nodeID int32, bytes func() (sendfile, copied int64)) {
	labels := prometheus.Labels{"node": fmt.Sprint(nodeID)}
	m.registry.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kraftd_fetch_records_sendfile_bytes_total",
			Help: "Fetch record bytes sent from segment files with sendfile(2).", ConstLabels: labels},
			func() float64 { s, _ := bytes(); return float64(s) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kraftd_fetch_records_copied_bytes_total",
			Help: "Fetch record bytes read from segment files and copied to the socket (no sendfile on this connection).", ConstLabels: labels},
			func() float64 { _, c := bytes(); return float64(c) }))
}
