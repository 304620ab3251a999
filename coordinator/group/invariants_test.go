package group

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// checkInvariants asserts group.go's INVARIANTS on every loaded group.
// lastGen is per group object: a deleted group comes back as a new one.
func checkInvariants(t *testing.T, c *Coordinator, lastGen map[*group]int32) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, sh := range c.shards {
		for id, g := range sh.groups {
			fail := func(format string, args ...any) {
				t.Helper()
				t.Fatalf("group %s (%v, generation %d): %s", id, g.state, g.generation, fmt.Sprintf(format, args...))
			}
			if g.leader != "" && g.members[g.leader] == nil {
				fail("leader %q is not a member", g.leader)
			}
			for inst, mid := range g.static {
				if m := g.members[mid]; m == nil || m.instanceID == nil || *m.instanceID != inst {
					fail("static %s -> %s is not that member", inst, mid)
				}
			}
			for mid := range g.pending {
				if g.members[mid] != nil {
					fail("pending %s is a member", mid)
				}
			}
			if (g.state == Empty || g.state == Dead) && len(g.members) > 0 {
				fail("%d members", len(g.members))
			}
			for mid, m := range g.members {
				if m.joinWait != nil && g.state != PreparingRebalance {
					fail("member %s has a parked join", mid)
				}
				if m.syncWait != nil && g.state != CompletingRebalance {
					fail("member %s has a parked sync", mid)
				}
			}
			if g.generation < lastGen[g] {
				fail("generation went back from %d", lastGen[g])
			}
			lastGen[g] = g.generation
		}
	}
}

// TestRandomClientsKeepInvariants drives one group with random joins (new,
// known and static), syncs, heartbeats, leaves and clock moves, checking
// the invariants after every step; at the end, with time run far ahead,
// every parked request has been answered.
func TestRandomClientsKeepInvariants(t *testing.T) {
	for seed := range uint64(14) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			e := newEnv(t)
			rng := rand.New(rand.NewPCG(seed, 16))
			ids := map[int]string{}
			gens := map[int]int32{}
			instances := []string{"s0", "s1"}
			var wg sync.WaitGroup
			var mu sync.Mutex
			lastGen := map[*group]int32{}
			for range 150 {
				client := rng.IntN(4)
				mu.Lock()
				id, gen := ids[client], gens[client]
				mu.Unlock()
				switch op := rng.IntN(7); op {
				case 0, 1: // join
					r := joinReq{member: id}
					if client < len(instances) {
						r.instance = &instances[client]
					}
					ch := e.joinAsync("g", r)
					wg.Go(func() {
						resp := <-ch
						if resp == nil {
							return
						}
						mu.Lock()
						defer mu.Unlock()
						if resp.ErrorCode == 0 || resp.MemberID != "" && resp.Generation < 0 {
							ids[client] = resp.MemberID
						}
						if resp.ErrorCode == 0 {
							gens[client] = resp.Generation
						}
					})
				case 2: // sync, as leader with an assignment for itself
					ch := e.sync("g", id, gen, map[string]string{id: "a"})
					wg.Go(func() { <-ch })
				case 3:
					e.heartbeat("g", id, gen)
				case 4:
					req := kmsg.NewPtrLeaveGroupRequest()
					req.Version = 4
					req.Group = "g"
					req.Members = []kmsg.LeaveGroupRequestMember{{MemberID: id}}
					e.c.LeaveGroup(req)
				default:
					e.advance(int64(rng.IntN(8000)))
				}
				checkInvariants(t, e.c, lastGen)
			}
			// Nobody heartbeats any more: every session and deadline runs
			// out. A request still on its way parks after it arrives, so
			// time keeps moving until all are answered.
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			for i := 0; ; i++ {
				e.advance(30_000)
				select {
				case <-done:
				case <-time.After(10 * time.Millisecond):
					if i == 300 {
						t.Fatal("parked requests still unanswered after every deadline passed")
					}
					continue
				}
				break
			}
			for range 5 { // the last answers may have started a sync phase: let it run out
				e.advance(30_000)
			}
			checkInvariants(t, e.c, lastGen)
			if s := e.state("g"); s != Empty && s != Dead {
				t.Fatalf("state %v after every session ran out", s)
			}
		})
	}
}
