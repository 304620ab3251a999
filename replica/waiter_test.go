package replica

import "testing"

// A Waiter registered with a partition is woken by its next append (and,
// with ISR [1], the high watermark move); one registered with many is woken
// by any; a partition nobody appends to keeps only a bounded number of the
// stopped waiters of past long polls (issue 17: one per fetch pass on each
// of ~33k idle partitions must not pile up).
func TestWaiterWakeAndBoundedIdleList(t *testing.T) {
	m := newManager(t, t.TempDir())
	p := lead(t, m)
	idle := &Partition{}

	app, chg := NewWaiter(), NewWaiter()
	p.WakeOnAppend(app)
	p.WakeOnChange(chg)
	idle.WakeOnAppend(app)
	idle.WakeOnChange(chg)
	for _, w := range []*Waiter{app, chg} {
		select {
		case <-w.C():
			t.Fatal("woken before any append")
		default:
		}
	}
	appendOK(t, p, batch(1, -1, 0, 0))
	for name, w := range map[string]*Waiter{"append": app, "change": chg} {
		select {
		case <-w.C():
		default:
			t.Fatalf("%s waiter not woken by the append", name)
		}
	}
	if len(p.appendWaiters) != 0 || len(p.changeWaiters) != 0 {
		t.Fatalf("woken partition keeps %d+%d waiters", len(p.appendWaiters), len(p.changeWaiters))
	}

	// 10,000 long polls on an idle partition, each stopped after its pass.
	for range 10_000 {
		w := NewWaiter()
		idle.WakeOnAppend(w)
		w.Stop()
	}
	if n := cap(idle.appendWaiters); n > 16 {
		t.Fatalf("idle partition holds room for %d waiters after 10,000 stopped ones, want a handful", n)
	}
	// Live waiters are never swept.
	var live []*Waiter
	for range 100 {
		w := NewWaiter()
		live = append(live, w)
		idle.WakeOnAppend(w)
	}
	idle.notifyAppend()
	for i, w := range live {
		select {
		case <-w.C():
		default:
			t.Fatalf("live waiter %d not woken", i)
		}
	}
}
