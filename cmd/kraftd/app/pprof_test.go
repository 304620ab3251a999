package app

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestPprofNeedsLoopback: kraftd.pprof.enable is off by default and, on,
// needs metrics.listener set and bound to loopback, as the fault switches.
func TestPprofNeedsLoopback(t *testing.T) {
	if c := embedded(t); c.PprofEnable {
		t.Fatal("pprof on by default")
	}
	cases := map[string]Config{
		"metrics.listener, which is not set": embedded(t, Setting{"kraftd.pprof.enable", "true"}),
		"must then bind a loopback address": embedded(t, Setting{"kraftd.pprof.enable", "true"},
			Setting{"metrics.listener", "0.0.0.0:9100"}),
		`not ":9100"`: embedded(t, Setting{"kraftd.pprof.enable", "true"}, Setting{"metrics.listener", ":9100"}),
	}
	for want, c := range cases {
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v, want %q", err, want)
		}
	}
	for _, addr := range []string{"127.0.0.1:9100", "localhost:9100", "[::1]:9100"} {
		c := embedded(t, Setting{"kraftd.pprof.enable", "true"}, Setting{"metrics.listener", addr})
		if err := c.Validate(); err != nil {
			t.Errorf("metrics.listener %s: %v", addr, err)
		}
	}
}

// TestPprofServedOnMetricsListener: a node with kraftd.pprof.enable serves
// a goroutine dump under /debug/pprof/ beside /metrics; one without it
// answers 404 there.
func TestPprofServedOnMetricsListener(t *testing.T) {
	get := func(a *App, path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + a.MetricsAddr().String() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(body)
	}
	for _, on := range []bool{true, false} {
		settings := []Setting{{"controller.quorum.voters", "1@127.0.0.1:0"}, {"metrics.listener", "127.0.0.1:0"}}
		if on {
			settings = append(settings, Setting{"kraftd.pprof.enable", "true"})
		}
		a, err := New(ephemeralConfig(t, settings...))
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		code, body := get(a, "/debug/pprof/goroutine?debug=1")
		switch {
		case on && (code != http.StatusOK || !strings.Contains(body, "goroutine profile: total")):
			t.Errorf("pprof on: GET /debug/pprof/goroutine: %d %.200q", code, body)
		case !on && code != http.StatusNotFound:
			t.Errorf("pprof off: GET /debug/pprof/goroutine: %d, want 404", code)
		}
		if code, body := get(a, "/metrics"); code != http.StatusOK || !strings.Contains(body, "kraftd_broker_state") {
			t.Errorf("pprof %v: GET /metrics: %d", on, code)
		}
		if err := a.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}
