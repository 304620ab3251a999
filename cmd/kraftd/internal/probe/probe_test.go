package probe

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func acked(part int32, off int64) outcome {
	return outcome{done: true, partition: part, offset: off, acked: time.Millisecond}
}

func failed() outcome { return outcome{done: true, err: kgo.ErrClientClosed} }

// TestCheckFindsEveryBrokenGuarantee: the verifier's judgement on hand-made
// reads, one broken guarantee per case, and the clean cases it must pass.
func TestCheckFindsEveryBrokenGuarantee(t *testing.T) {
	outs := []outcome{acked(0, 0), acked(0, 1), failed(), acked(1, 0)}
	for _, tc := range []struct {
		name string
		recs []readRecord
		want string // substring of the first problem; "" = passes
	}{
		{"all acked read", []readRecord{{0, 0, 0}, {0, 1, 1}, {1, 0, 3}}, ""},
		{"unacked read once", []readRecord{{0, 0, 0}, {0, 1, 1}, {0, 2, 2}, {1, 0, 3}}, ""},
		{"foreign records between", []readRecord{{0, 0, 0}, {0, 1, 1}, {0, 2, -1}, {1, 0, 3}}, ""},
		{"acked lost", []readRecord{{0, 0, 0}, {1, 0, 3}}, "acknowledged record 1 (partition 0 offset 1) lost"},
		{"acked read twice", []readRecord{{0, 0, 0}, {0, 1, 1}, {0, 2, 1}, {1, 0, 3}}, "record 1 read twice"},
		{"unacked read twice", []readRecord{{0, 0, 0}, {0, 1, 1}, {0, 2, 2}, {0, 3, 2}, {1, 0, 3}}, "record 2 read twice"},
		{"acked elsewhere", []readRecord{{0, 0, 0}, {0, 1, 3}, {1, 0, 1}}, "record 3 acknowledged at partition 1 offset 0, read at partition 0 offset 1"},
		{"out of order", []readRecord{{0, 0, 2}, {0, 1, 0}, {0, 2, 1}, {1, 0, 3}}, "out of order"},
		{"offset skipped", []readRecord{{0, 0, 0}, {0, 1, 1}, {0, 3, -1}, {1, 0, 3}}, "offset 3 read after 1"},
		{"never sent", []readRecord{{0, 0, 0}, {0, 1, 1}, {0, 2, 9}, {1, 0, 3}}, "record 9 was never sent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := check(outs, tc.recs, nil)
			switch {
			case tc.want == "" && len(v.Problems) > 0:
				t.Fatalf("problems on a clean read: %v", v.Problems)
			case tc.want != "" && (len(v.Problems) == 0 || !strings.Contains(v.Problems[0], tc.want)):
				t.Fatalf("problems %q, want first to contain %q", v.Problems, tc.want)
			}
		})
	}
}

func TestLongestGapCountsTheStuckEnd(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	if g, at := longestGap([]time.Duration{ms(30), ms(10), ms(20), ms(500), ms(510)}, ms(600)); g != ms(470) || at != ms(30) {
		t.Fatalf("gap %v at %v, want 470ms at 30ms", g, at)
	}
	if g, at := longestGap([]time.Duration{ms(10), ms(20)}, ms(2000)); g != ms(1980) || at != ms(20) {
		t.Fatalf("gap %v at %v, want the 1980ms since the last ack", g, at)
	}
	if g, _ := longestGap(nil, ms(100)); g != 0 {
		t.Fatalf("gap %v without acks", g)
	}
}

func TestSeqOfOnlyThisRun(t *testing.T) {
	if n := seqOf("ab", []byte(header("ab", 42)+"xxxx")); n != 42 {
		t.Fatalf("seq %d, want 42", n)
	}
	for _, v := range []string{header("abc", 42), "kraftd-probe ab -1 ", "kraftd-probe ab 12", "hello"} {
		if n := seqOf("ab", []byte(v)); n != -1 {
			t.Fatalf("seqOf(%q) = %d, want -1", v, n)
		}
	}
}

// TestProbeAgainstKfake runs the real producer and verifier over the wire
// against franz-go's in-memory cluster: records go out at the rate, all are
// acknowledged and read back once, and a foreign record in the topic is
// told apart.
func TestProbeAgainstKfake(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "probe"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	other, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("probe"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.ProduceSync(ctx, &kgo.Record{Value: []byte("not the probe's")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	p, err := Start(Config{Bootstrap: c.ListenAddrs(), Topic: "probe", Rate: 500, NoLeaderHints: true})
	if err != nil {
		t.Fatal(err)
	}
	for p.Acked() < 100 {
		select {
		case <-ctx.Done():
			t.Fatal("fewer than 100 acknowledgements")
		case <-time.After(10 * time.Millisecond):
		}
	}
	r := p.Stop(ctx)
	if r.Acked < 100 || r.Failed != 0 || r.Acked != r.Sent || r.P50 <= 0 || r.LongestGap <= 0 || r.LongestGap > 10*time.Second {
		t.Fatalf("result %v", r)
	}
	// The pace: never above Rate records a second over the run (a loaded
	// machine may fall behind it, so no lower bound: 215/s was seen at load 16).
	if perSec := float64(r.Sent) / r.Window.Seconds(); perSec > 750 {
		t.Fatalf("%.0f records/s, want at most about 500: %v", perSec, r)
	}
	v, err := p.Verify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Problems) > 0 || v.AckedFound != r.Acked || v.Foreign != 1 {
		t.Fatalf("verification %v (%v), result %v", v, v.Problems, r)
	}
	adm := kadm.NewClient(other)
	ends, err := adm.ListEndOffsets(ctx, "probe")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	if total != int64(v.Read+v.Foreign) {
		t.Fatalf("topic holds %d records, verifier read %d", total, v.Read+v.Foreign)
	}
}

func TestSettledWaitsForEveryOlderRecord(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	p := &Probe{start: time.Now().Add(-ms(1000))}
	if p.Settled(ms(200)) {
		t.Fatal("settled with nothing sent")
	}
	p.outcomes = []outcome{{sent: ms(100)}, {sent: ms(200), done: true, acked: ms(210)}}
	if p.Settled(ms(200)) {
		t.Fatal("settled while a record sent 900 ms ago has no outcome")
	}
	p.outcomes[0] = outcome{sent: ms(100), done: true, acked: ms(950)}
	p.outcomes = append(p.outcomes, outcome{sent: ms(990)})
	if !p.Settled(ms(200)) {
		t.Fatal("not settled: every record older than 200 ms is acknowledged")
	}
	p.outcomes = []outcome{{sent: ms(100), done: true, err: kgo.ErrClientClosed}}
	if p.Settled(ms(200)) {
		t.Fatal("settled with nothing acknowledged")
	}
	// A record that failed before the producer recovered does not hold the
	// probe unsettled for good; one that failed since does.
	p.outcomes = append(p.outcomes, outcome{sent: ms(300), done: true, acked: ms(310)})
	if !p.Settled(ms(200)) {
		t.Fatal("not settled: the failure at 100 ms was followed by acknowledgements")
	}
	p.outcomes = append(p.outcomes, outcome{sent: ms(400), done: true, err: kgo.ErrRecordTimeout})
	if p.Settled(ms(200)) {
		t.Fatal("settled while the newest decided record failed")
	}
}
