package interop

import (
	"slices"
	"strings"
	"testing"
)

// The lint must itself be tested: each rule fires on a bad example and
// stays quiet on the good one and on lint:ignore.

func TestImportRulesFire(t *testing.T) {
	m := module + "/"
	cases := []struct {
		pkg  listedPackage
		want string // substring of the single expected violation; "" = none
	}{
		{listedPackage{ImportPath: m + "protocol", Deps: []string{"fmt", m + "quorum"}}, "protocol may import only"},
		{listedPackage{ImportPath: m + "quorum", Deps: []string{m + "protocol", m + "quorum/raftlog"}}, ""},
		{listedPackage{ImportPath: m + "quorum/raftlog", Deps: []string{m + "metadata/records"}}, "quorum may import only"},
		{listedPackage{ImportPath: m + "metadata/image", Deps: []string{m + "metadata/records"}}, ""},
		{listedPackage{ImportPath: m + "metadata/image", Deps: []string{m + "quorum"}}, "metadata/image may import only"},
		{listedPackage{ImportPath: m + "metadata/controller", Deps: []string{m + "metadata/image", m + "quorum", m + "protocol"}}, ""},
		{listedPackage{ImportPath: m + "broker", Deps: []string{m + "legacyzk"}}, "broker must not import"},
		{listedPackage{ImportPath: m + "legacyzk", Deps: []string{m + "broker"}}, "legacyzk must not import"},
		{listedPackage{ImportPath: m + "broker", Deps: []string{"github.com/spf13/pflag"}}, "only cmd/kraftd parses flags"},
		{listedPackage{ImportPath: m + "cmd/kraftd", Deps: []string{"github.com/spf13/pflag", m + "cmd/kraftd/app"}}, ""},
		{listedPackage{ImportPath: m + "broker", Deps: []string{m + "cmd/kraftd/app"}}, "only cmd/kraftd and interop"},
		{listedPackage{ImportPath: m + "broker", TestImports: []string{m + "interop"}}, "tests import interop"},
		{listedPackage{ImportPath: m + "interop", XTestImports: []string{m + "cmd/kraftd/app"}}, ""},
		{listedPackage{ImportPath: "example.com/other", Deps: []string{"github.com/spf13/pflag"}}, ""},
	}
	for _, tc := range cases {
		got := importViolations(tc.pkg)
		switch {
		case tc.want == "" && len(got) != 0:
			t.Errorf("%s: unexpected %v", tc.pkg.ImportPath, got)
		case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want)):
			t.Errorf("%s: got %v, want one violation containing %q", tc.pkg.ImportPath, got, tc.want)
		}
	}
}

func TestSourceRulesFire(t *testing.T) {
	const core = `package quorum

import ("time"; "go.uber.org/zap")

func f() {
	_ = time.Now()
	_ = time.Now() // lint:ignore wallclock: test
	time.Sleep(1)
	go func() {}()
	go g() // a named function is fine
	_ = zap.L()
	_ = time.Duration(3) // not a clock read
}

func g() {}
`
	got, err := sourceViolations("quorum/raft.go", []byte(core))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"quorum/raft.go:6: [wallclock]",
		"quorum/raft.go:8: [wallclock]",
		"quorum/raft.go:9: [barego]",
		"quorum/raft.go:11: [zapglobal]",
	}
	if len(got) != len(want) {
		t.Fatalf("got %d violations %v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("violation %d = %q, want prefix %q", i, got[i], want[i])
		}
	}
	for _, exempt := range []string{"quorum/node_shell.go", "quorum/transport.go", "quorum/raft_test.go", "broker/broker.go"} {
		got, err := sourceViolations(exempt, []byte(core))
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, "[wallclock]") }) {
			t.Errorf("%s: wallclock should not apply: %v", exempt, got)
		}
		if !slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, "[zapglobal]") }) {
			t.Errorf("%s: zapglobal applies everywhere: %v", exempt, got)
		}
	}
	got, _ = sourceViolations("metadata/controller/controller.go", []byte(strings.Replace(core, "package quorum", "package controller", 1)))
	if len(got) != 4 {
		t.Errorf("metadata/controller: %v", got)
	}
}
