package controller

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata transcripts with the actual output")

// testCase is one transcript command:
//
//	cmd key=value key2=v1,v2 flag
//	optional input lines
//	----
//	expected output, up to the first empty line
type testCase struct {
	pos   string
	cmd   string
	args  map[string]string
	input []string
}

func (tc *testCase) arg(key, def string) string {
	if v, ok := tc.args[key]; ok {
		return v
	}
	return def
}

func (tc *testCase) has(key string) bool { _, ok := tc.args[key]; return ok }

// runTranscript runs the file at path through fn, or rewrites it with the
// actual output when -rewrite is set. '#' lines and blank lines between
// cases are kept.
func runTranscript(t *testing.T, path string, fn func(*testCase) string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	var out strings.Builder
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			out.WriteString(line + "\n")
			continue
		}
		tc := &testCase{pos: fmt.Sprintf("%s:%d", path, i+1), args: map[string]string{}}
		fields := strings.Fields(line)
		tc.cmd = fields[0]
		for _, f := range fields[1:] {
			k, v, _ := strings.Cut(f, "=")
			tc.args[k] = v
		}
		out.WriteString(line + "\n")
		for i++; i < len(lines) && lines[i] != "----"; i++ {
			tc.input = append(tc.input, lines[i])
			out.WriteString(lines[i] + "\n")
		}
		if i >= len(lines) {
			t.Fatalf("%s: missing ----", tc.pos)
		}
		var exp []string
		for i+1 < len(lines) && lines[i+1] != "" {
			i++
			exp = append(exp, lines[i])
		}
		got := strings.TrimRight(fn(tc), "\n")
		for strings.Contains(got, "\n\n") {
			got = strings.ReplaceAll(got, "\n\n", "\n")
		}
		out.WriteString("----\n")
		if got != "" {
			out.WriteString(got + "\n")
		}
		if !*rewrite && got != strings.Join(exp, "\n") {
			t.Fatalf("%s: %s\n--- expected:\n%s\n--- got:\n%s", tc.pos, line, strings.Join(exp, "\n"), got)
		}
	}
	if *rewrite {
		res := strings.TrimRight(out.String(), "\n") + "\n"
		if err := os.WriteFile(path, []byte(res), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
