package protocol

import (
	"maps"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ControlKey installs a fault-injection hook for one API key on every
// listener of the server (fn == nil removes it). Before the registered
// Handler runs, fn sees the decoded request and returns
// (resp, err, handled):
//
//   - handled == false: the request proceeds to its Handler as usual;
//   - handled, err != nil: the connection is closed with no response;
//   - handled, resp != nil: resp is sent instead of the Handler's answer;
//   - handled, resp == nil, err == nil: the request is dropped silently.
//     No response is ever written for that correlation id, the connection
//     stays open and later requests are answered, which is what a lost
//     response looks like to a client (it times out).
//
// fn runs on the connection's reader goroutine, so blocking in fn delays
// that connection only; this is how tests inject latency.
func (s *Server) ControlKey(key int16, fn func(*Request) (kmsg.Response, error, bool)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := make(map[int16]ControlFunc)
	if cur := s.controls.Load(); cur != nil {
		next = maps.Clone(*cur)
	}
	if fn == nil {
		delete(next, key)
	} else {
		next[key] = fn
	}
	s.controls.Store(&next)
}

// control returns the hook for key, if any. Lock-free on the request path.
func (s *Server) control(key int16) ControlFunc {
	if cur := s.controls.Load(); cur != nil {
		return (*cur)[key]
	}
	return nil
}
