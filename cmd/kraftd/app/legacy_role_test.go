package app

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kraftd/kraftd/legacyzk"
	"github.com/kraftd/kraftd/protocol"
)

// TestGateClientAPIsHoldsRequestsUntilReady: before the legacy broker
// knows its cluster id a Metadata request waits (it is neither answered
// nor cut off); once the real handler is registered and the gate opens,
// the waiting request gets the real handler's answer.
func TestGateClientAPIsHoldsRequestsUntilReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := protocol.NewRegistry()
		ready := make(chan struct{})
		gateClientAPIs(reg, ready)
		for _, key := range []int16{3, 19, 20, 32, 37, 60} {
			if _, _, _, ok := reg.Lookup(key); !ok {
				t.Fatalf("key %d not gated", key)
			}
		}
		_, _, gate, _ := reg.Lookup(3)
		body := kmsg.NewPtrMetadataRequest()
		var got kmsg.Response
		done := make(chan struct{})
		go func() {
			defer close(done)
			got, _ = gate(context.Background(), &protocol.Request{Key: 3, Body: body})
		}()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("a gated request was answered before the gate opened")
		default:
		}
		want := kmsg.NewPtrMetadataResponse()
		want.ControllerID = 7
		reg.Register(3, 0, 13, func(context.Context, *protocol.Request) (kmsg.Response, error) { return want, nil })
		close(ready)
		<-done
		if got != want {
			t.Fatalf("answer %+v, want the real handler's", got)
		}
	})
}

// TestGateClientAPIsEndsWithTheConnection: a failed start closes the
// listener; a gated request then ends with its connection.
func TestGateClientAPIsEndsWithTheConnection(t *testing.T) {
	reg := protocol.NewRegistry()
	gateClientAPIs(reg, make(chan struct{}))
	_, _, gate, _ := reg.Lookup(60)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := gate(ctx, &protocol.Request{Key: 60, Body: kmsg.NewPtrDescribeClusterRequest()}); err == nil {
		t.Fatal("a gated request outlived its connection")
	}
}

// TestFaultsHandler: POST /faults flips legacyzk's switches by name and
// refuses unknown ones.
func TestFaultsHandler(t *testing.T) {
	mem := legacyzk.NewMemServer()
	lb, err := legacyzk.NewBroker(context.Background(), legacyzk.Config{NodeID: 1,
		Dial: func(context.Context) (legacyzk.Store, error) { return mem.Connect(), nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	h := faultsHandler(lb)
	post := func(body string) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/faults", strings.NewReader(body)))
		return rec.Code
	}
	if code := post("pause-before-push\n"); code != http.StatusNoContent || !lb.Faults().PauseBeforePush.Load() {
		t.Fatalf("pause-before-push: %d", code)
	}
	if code := post("clear"); code != http.StatusNoContent || lb.Faults().PauseBeforePush.Load() {
		t.Fatalf("clear: %d", code)
	}
	if code := post("melt-down"); code != http.StatusBadRequest {
		t.Fatalf("unknown switch: %d", code)
	}
}
