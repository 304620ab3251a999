package quorumtest

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestCase is one command of a transcript: "cmd key=val ... / ---- / expected".
type TestCase struct {
	Pos      string
	Cmd      string
	Args     []Arg
	Expected string
}

// Arg is one "key=value" (or bare "key") argument; Vals splits value on commas.
type Arg struct {
	Key  string
	Vals []string
}

// RunFile runs the transcript at path through fn. With rewrite set, it rewrites the
// file with the actual output instead of failing on differences.
//
// Format: a command line, "----", then the expected output up to the first empty
// line. Lines starting with '#' between cases are comments and are kept on rewrite.
func RunFile(t *testing.T, path string, rewrite bool, fn func(*TestCase) string) {
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
		tc := &TestCase{Pos: fmt.Sprintf("%s:%d", path, i+1)}
		tc.Cmd, tc.Args = parseCmd(line)
		i++
		if i >= len(lines) || lines[i] != "----" {
			t.Fatalf("%s: expected ---- after command", tc.Pos)
		}
		var exp []string
		for i+1 < len(lines) && lines[i+1] != "" {
			i++
			exp = append(exp, lines[i])
		}
		tc.Expected = strings.Join(exp, "\n")
		got := strings.TrimRight(fn(tc), "\n")
		got = strings.ReplaceAll(got, "\n\n", "\n")
		if rewrite {
			out.WriteString(line + "\n----\n")
			if got != "" {
				out.WriteString(got + "\n")
			}
			continue
		}
		if got != tc.Expected {
			t.Fatalf("%s: %s\n--- expected:\n%s\n--- got:\n%s", tc.Pos, line, tc.Expected, got)
		}
	}
	if rewrite {
		res := strings.TrimRight(out.String(), "\n") + "\n"
		if err := os.WriteFile(path, []byte(res), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func parseCmd(line string) (string, []Arg) {
	sc := bufio.NewScanner(strings.NewReader(line))
	sc.Split(bufio.ScanWords)
	sc.Scan()
	cmd := sc.Text()
	var args []Arg
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		a := Arg{Key: k}
		if ok {
			a.Vals = strings.Split(v, ",")
		}
		args = append(args, a)
	}
	return cmd, args
}

// Arg returns the argument named key.
func (tc *TestCase) Arg(key string) (Arg, bool) {
	for _, a := range tc.Args {
		if a.Key == key {
			return a, true
		}
	}
	return Arg{}, false
}
