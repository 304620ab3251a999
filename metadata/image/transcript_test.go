package image

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kraftd/kraftd/metadata/records"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata transcripts with actual output")

// A transcript is a sequence of cases:
//
//	command [args]
//	input line...
//	----
//	expected output...
//	<blank line>
//
// Lines starting with # between cases are comments. Commands:
//
//	replay [epoch=N]  one record per input line, in one delta; prints the
//	                  delta's changes and the new image, or the error (the
//	                  image then stays as it was)
//	dump              the current image
//	check             Check and CheckLeaders
//	led-by N / isr-member N / replica-of N   the scans
//	records           Records() as kafka-dump-log JSON, one per line
//
// Record lines are `kind key=value ...`; lists are comma separated, ids
// are small integers (see parseUUID).
func TestTranscripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { runTranscript(t, f) })
	}
}

type tcase struct {
	comments []string
	cmd      string
	input    []string
	expected string
}

func parseTranscript(t *testing.T, path string) []tcase {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cases []tcase
	lines := strings.Split(string(data), "\n")
	for i := 0; i < len(lines); {
		var c tcase
		for i < len(lines) && (lines[i] == "" || strings.HasPrefix(lines[i], "#")) {
			c.comments = append(c.comments, lines[i])
			i++
		}
		if i >= len(lines) {
			break
		}
		c.cmd = lines[i]
		for i++; i < len(lines) && lines[i] != "----"; i++ {
			c.input = append(c.input, lines[i])
		}
		var out []string
		for i++; i < len(lines) && lines[i] != ""; i++ {
			out = append(out, lines[i])
		}
		if len(out) > 0 {
			c.expected = strings.Join(out, "\n") + "\n"
		}
		cases = append(cases, c)
	}
	return cases
}

func runTranscript(t *testing.T, path string) {
	cases := parseTranscript(t, path)
	env := &tenv{img: Empty()}
	var sb strings.Builder
	for _, c := range cases {
		got := env.run(t, c)
		if !*rewrite && got != c.expected {
			t.Errorf("%s: %s\n got:\n%s\nwant:\n%s", path, c.cmd, got, c.expected)
		}
		for _, l := range c.comments {
			sb.WriteString(l + "\n")
		}
		sb.WriteString(c.cmd + "\n")
		for _, l := range c.input {
			sb.WriteString(l + "\n")
		}
		sb.WriteString("----\n" + got)
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

type tenv struct {
	img    *Image
	offset int64
}

func (e *tenv) run(t *testing.T, c tcase) string {
	fields := strings.Fields(c.cmd)
	switch fields[0] {
	case "replay":
		return e.replay(t, fields[1:], c.input)
	case "dump":
		return e.img.Dump()
	case "check":
		if err := e.img.Check(); err != nil {
			return err.Error() + "\n"
		}
		if err := e.img.CheckLeaders(); err != nil {
			return err.Error() + "\n"
		}
		return "ok\n"
	case "led-by", "isr-member", "replica-of":
		b, _ := strconv.Atoi(fields[1])
		return e.scan(fields[0], int32(b))
	case "records":
		var sb strings.Builder
		for _, r := range e.img.Records() {
			j, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			sb.Write(j)
			sb.WriteByte('\n')
		}
		return sb.String()
	}
	t.Fatalf("unknown command %q", c.cmd)
	return ""
}

func (e *tenv) scan(cmd string, b int32) string {
	var tps []TopicPartition
	switch cmd {
	case "led-by":
		tps = e.img.PartitionsLedBy(b)
	case "isr-member":
		tps = e.img.PartitionsWithISRMember(b)
	default:
		tps = e.img.PartitionsWithReplica(b)
	}
	var sb strings.Builder
	for _, tp := range tps {
		topic, _ := e.img.TopicByID(tp.TopicID)
		fmt.Fprintf(&sb, "%s-%d\n", topic.Name(), tp.Partition)
	}
	if sb.Len() == 0 {
		return "none\n"
	}
	return sb.String()
}

func (e *tenv) replay(t *testing.T, args, input []string) string {
	epoch := int32(1)
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "epoch="); ok {
			n, _ := strconv.Atoi(v)
			epoch = int32(n)
		}
	}
	d := NewDelta(e.img)
	for _, line := range input {
		m, err := parseRecord(line)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if err := d.Replay(e.offset, epoch, records.Record{Message: m}); err != nil {
			e.offset++
			return "error: " + err.Error() + "\n"
		}
		e.offset++
	}
	next := d.Apply()
	if err := CheckTransition(e.img, next); err != nil {
		t.Fatalf("transition: %v", err)
	}
	e.img = next
	return describeDelta(d) + next.Dump()
}

func describeDelta(d *Delta) string {
	var sb strings.Builder
	for _, c := range d.TopicChanges() {
		switch {
		case c.Deleted:
			fmt.Fprintf(&sb, "changed topic %s deleted\n", c.Name)
		case c.Created:
			fmt.Fprintf(&sb, "changed topic %s created partitions=%v\n", c.Name, c.Partitions)
		default:
			fmt.Fprintf(&sb, "changed topic %s partitions=%v\n", c.Name, c.Partitions)
		}
	}
	if bs := d.BrokerChanges(); len(bs) > 0 {
		fmt.Fprintf(&sb, "changed brokers %v\n", bs)
	}
	if cs := d.ConfigChanges(); len(cs) > 0 {
		fmt.Fprintf(&sb, "changed configs %v\n", cs)
	}
	if d.FeaturesChanged() {
		fmt.Fprintf(&sb, "changed features metadataVersionChanged=%t\n", d.MetadataVersionChanged())
	}
	if d.ProducerIDsChanged() {
		sb.WriteString("changed producerIds\n")
	}
	return sb.String()
}
