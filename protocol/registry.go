package protocol

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Registry is the set of APIs one listener serves: for each key the version
// range it accepts (and advertises in ApiVersions) and the Handler.
//
// Registrations may happen while connections are being served: lookups read
// an immutable snapshot through an atomic pointer, so the per-request path
// takes no lock and a concurrent Register is seen by the next request.
//
// INVARIANTS: every entry's key is known to kmsg; 0 <= min <= max <= the
// kmsg max version for that key (never advertise what we cannot decode);
// key 18 is always present.
type Registry struct {
	mu   sync.Mutex // serializes writers; readers use apis and hook directly
	apis atomic.Pointer[registrySnapshot]
	hook atomic.Pointer[ApiVersionsHook]
}

// registrySnapshot is an immutable view of the registrations. The sorted
// ApiVersions table is built once per Register, not once per request:
// building it dominated the cost of answering ApiVersions.
type registrySnapshot struct {
	byKey    map[int16]registration
	versions []kmsg.ApiVersionsResponseApiKey // sorted by key
}

func newSnapshot(byKey map[int16]registration) *registrySnapshot {
	keys := slices.Sorted(maps.Keys(byKey))
	versions := make([]kmsg.ApiVersionsResponseApiKey, 0, len(keys))
	for _, k := range keys {
		v := kmsg.NewApiVersionsResponseApiKey()
		v.ApiKey, v.MinVersion, v.MaxVersion = k, byKey[k].minVersion, byKey[k].maxVersion
		versions = append(versions, v)
	}
	return &registrySnapshot{byKey: byKey, versions: versions}
}

// ApiVersionsHook lets an upper layer decorate an ApiVersions answer, e.g.
// with SupportedFeatures / FinalizedFeatures (KIP-584) or a
// REBOOTSTRAP_REQUIRED check of the v5 ClusterID/NodeID (KIP-1242).
type ApiVersionsHook func(req *Request, resp *kmsg.ApiVersionsResponse)

type registration struct {
	minVersion int16
	maxVersion int16
	handler    Handler
}

// NewRegistry returns a Registry that serves only ApiVersions (key 18,
// v0-v5), answered from the registry itself.
func NewRegistry() *Registry {
	r := &Registry{}
	r.apis.Store(newSnapshot(map[int16]registration{}))
	r.Register(apiVersionsKey, 0, 5, r.handleApiVersions)
	return r
}

// Register serves key at versions [minVersion, maxVersion] with h,
// replacing any earlier registration of the same key (including the
// built-in ApiVersions, although SetApiVersionsHook is usually what you
// want). It panics on a key kmsg does not know, a bad range, a max above
// kmsg's max for the key, or a nil handler: these are programming errors.
func (r *Registry) Register(key, minVersion, maxVersion int16, h Handler) {
	proto := kmsg.RequestForKey(key)
	switch {
	case proto == nil:
		panic(fmt.Sprintf("protocol: Register: unknown api key %d", key))
	case minVersion < 0 || maxVersion < minVersion:
		panic(fmt.Sprintf("protocol: Register: bad range %d-%d for key %d", minVersion, maxVersion, key))
	case maxVersion > proto.MaxVersion():
		panic(fmt.Sprintf("protocol: Register: key %d max %d above kmsg max %d", key, maxVersion, proto.MaxVersion()))
	case h == nil:
		panic(fmt.Sprintf("protocol: Register: nil handler for key %d", key))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	next := maps.Clone(r.apis.Load().byKey)
	next[key] = registration{minVersion: minVersion, maxVersion: maxVersion, handler: h}
	r.apis.Store(newSnapshot(next))
}

// Lookup returns the registered range and handler for key.
func (r *Registry) Lookup(key int16) (minV, maxV int16, h Handler, ok bool) {
	reg, ok := r.apis.Load().byKey[key]
	return reg.minVersion, reg.maxVersion, reg.handler, ok
}

// Versions returns what ApiVersions advertises: every registered key with
// its range, sorted by key. The slice is a fresh copy.
func (r *Registry) Versions() []kmsg.ApiVersionsResponseApiKey {
	return slices.Clone(r.apis.Load().versions)
}

// SetApiVersionsHook installs fn (nil removes it). It runs on every
// ApiVersions answer that passed validation (ErrorCode 0, supported
// version), after ApiKeys is filled, and may change any field, including
// ErrorCode. It runs on connection goroutines, concurrently.
func (r *Registry) SetApiVersionsHook(fn func(req *Request, resp *kmsg.ApiVersionsResponse)) {
	if fn == nil {
		r.hook.Store(nil)
		return
	}
	h := ApiVersionsHook(fn)
	r.hook.Store(&h)
}
