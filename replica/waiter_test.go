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
	if len(p.waits.appendWaiters) != 0 || len(p.waits.changeWaiters) != 0 {
		t.Fatalf("woken partition keeps %d+%d waiters", len(p.waits.appendWaiters), len(p.waits.changeWaiters))
	}

	// 10,000 long polls on an idle partition, each stopped after its pass.
	for range 10_000 {
		w := NewWaiter()
		idle.WakeOnAppend(w)
		w.Stop()
	}
	if n := cap(idle.waits.appendWaiters); n > 16 {
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

// Keyed registrations tell the Waiter which fired (a fetch session reads
// only those again), and retention moving the log start fires a
// partition's registrations (fetch answers carry the log start; a session
// would not read the partition again otherwise).
func TestWaiterKeysAndRetentionWakes(t *testing.T) {
	m := newManager(t, t.TempDir())
	p := lead(t, m)
	cfg := p.Config()
	cfg.Delete, cfg.RetentionMs, cfg.SegmentBytes = true, 1, 100 // every batch its own segment, all expired
	p.setConfig(&cfg)
	for range 3 {
		appendOK(t, p, batch(1, -1, 0, 0))
	}
	w := NewWaiter()
	p.WakeOnChangeKey(w, "change")
	p.WakeOnAppendKey(w, "append")
	if got := w.Woken(); len(got) != 0 {
		t.Fatalf("woken %v before anything moved", got)
	}
	start := p.Log().StartOffset()
	if n, err := p.deleteOldSegments(p.hooks.nowMs()); err != nil || n == 0 {
		t.Fatalf("retention deleted %d segments (%v), want some", n, err)
	}
	if p.Log().StartOffset() == start {
		t.Fatal("retention left the log start")
	}
	select {
	case <-w.C():
	default:
		t.Fatal("retention moved the log start without waking the waiter")
	}
	got := w.Woken()
	if len(got) != 2 || got[0] != (Woken{Key: "change"}) || got[1] != (Woken{Key: "append", Append: true}) {
		t.Fatalf("woken %v, want the change then the append registration", got)
	}
	if got := w.Woken(); len(got) != 0 {
		t.Fatalf("woken %v again, want each firing reported once", got)
	}
}
