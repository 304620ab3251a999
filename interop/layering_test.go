package interop

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/kraftd/kraftd"

// listedPackage is the part of `go list -json` output the import rules need.
type listedPackage struct {
	ImportPath   string
	Deps         []string
	TestImports  []string
	XTestImports []string
}

// importRule constrains the project packages (and pflag) that the packages
// under prefix may depend on, transitively and without their tests.
type importRule struct {
	prefix  string   // project-relative package path; "x" matches x and x/...
	allowed []string // project-relative prefixes; nil means "anything not forbidden"
	denied  []string
}

// importRules is STYLE.md 2.1 "Allowed/Forbidden imports" as data.
var importRules = []importRule{
	{prefix: "protocol", allowed: []string{"protocol"}},
	{prefix: "storage", allowed: []string{"storage"}},
	{prefix: "quorum", allowed: []string{"quorum", "protocol", "storage"}},
	{prefix: "metadata/records", allowed: []string{"metadata/records"}},
	{prefix: "metadata/image", allowed: []string{"metadata/image", "metadata/records"}},
	{prefix: "metadata/controller", allowed: []string{"metadata/controller", "metadata/image", "metadata/records", "quorum", "protocol", "storage"}},
	{prefix: "replica", allowed: []string{"replica", "storage"}},
	{prefix: "coordinator", allowed: []string{"coordinator", "replica", "storage"}},
	{prefix: "broker", denied: []string{"metadata/controller", "legacyzk"}},
	{prefix: "legacyzk", denied: []string{"broker", "metadata/controller"}},
}

// under reports whether rel is prefix or inside it.
func under(rel, prefix string) bool {
	return rel == prefix || strings.HasPrefix(rel, prefix+"/")
}

func underAny(rel string, prefixes []string) bool {
	for _, p := range prefixes {
		if under(rel, p) {
			return true
		}
	}
	return false
}

// importViolations checks one package against every rule and returns one
// line per broken rule.
func importViolations(p listedPackage) []string {
	rel, ok := strings.CutPrefix(p.ImportPath, module+"/")
	if !ok {
		return nil
	}
	var out []string
	bad := func(format string, args ...any) { out = append(out, rel+": "+fmt.Sprintf(format, args...)) }
	for _, dep := range p.Deps {
		if dep == "github.com/spf13/pflag" && rel != "cmd/kraftd" {
			bad("imports pflag; only cmd/kraftd parses flags")
		}
		depRel, ok := strings.CutPrefix(dep, module+"/")
		if !ok {
			continue
		}
		checkProjectDep(rel, depRel, bad)
	}
	for _, imp := range append(append([]string(nil), p.TestImports...), p.XTestImports...) {
		switch imp {
		case module + "/interop":
			bad("tests import interop")
		case module + "/cmd/kraftd":
			bad("tests import cmd/kraftd")
		}
	}
	return out
}

func checkProjectDep(rel, dep string, bad func(string, ...any)) {
	switch {
	case dep == "cmd/kraftd":
		bad("imports cmd/kraftd")
	case under(dep, "interop"):
		bad("imports %s", dep)
	case under(dep, "cmd/kraftd/app") && rel != "cmd/kraftd" && !under(rel, "interop"):
		bad("imports %s; only cmd/kraftd and interop wire the app", dep)
	}
	for _, r := range importRules {
		if !under(rel, r.prefix) {
			continue
		}
		if r.allowed != nil && !underAny(dep, r.allowed) {
			bad("imports %s; %s may import only %s", dep, r.prefix, strings.Join(r.allowed, ", "))
		}
		if underAny(dep, r.denied) {
			bad("imports %s; %s must not import %s", dep, r.prefix, strings.Join(r.denied, ", "))
		}
	}
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func listPackages(t *testing.T, root string) []listedPackage {
	t.Helper()
	// -e: a package another helper is editing may not compile; its import
	// list is still reported, and the build itself is not this test's job.
	cmd := exec.Command("go", "list", "-e", "-deps=false", "-json=ImportPath,Deps,TestImports,XTestImports", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("decoding go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func TestLayeringImports(t *testing.T) {
	root := moduleRoot(t)
	pkgs := listPackages(t, root)
	if !slices.ContainsFunc(pkgs, func(p listedPackage) bool { return p.ImportPath == module+"/cmd/kraftd" }) {
		t.Fatalf("go list found %d packages but not cmd/kraftd; is the module root right?", len(pkgs))
	}
	var problems []string
	for _, p := range pkgs {
		problems = append(problems, importViolations(p)...)
	}
	sort.Strings(problems)
	for _, p := range problems {
		t.Error(p)
	}
}

// sourceRule is a rule about what a file may contain.
type sourceRule struct {
	name    string
	applies func(rel string) bool // rel is the slash path from the module root
	check   func(n ast.Node) string
}

var wallClockFuncs = map[string]bool{"Now": true, "After": true, "Sleep": true, "Since": true, "Until": true}

// wallClockExempt are the quorum files allowed to touch the real clock: the
// driver's production shell (node_shell.go: its clock, its goroutines, the snapshot
// writer's pacing) and the network transport. Everything else in quorum/*.go is
// deterministic: the core, and the driver's step machine (node.go, snapshot_node.go),
// which the simulation runs on its own clock.
var wallClockExempt = map[string]bool{"quorum/node_shell.go": true, "quorum/transport.go": true}

var sourceRules = []sourceRule{
	{
		name: "wallclock",
		applies: func(rel string) bool {
			if isTest(rel) || wallClockExempt[rel] {
				return false
			}
			return dirOf(rel) == "quorum" || under(dirOf(rel), "metadata/image") || under(dirOf(rel), "metadata/controller")
		},
		check: func(n ast.Node) string {
			if pkg, fn := calledSelector(n); pkg == "time" && wallClockFuncs[fn] {
				return "time." + fn + " in a deterministic core; take nowMs as an argument"
			}
			return ""
		},
	},
	{
		name:    "zapglobal",
		applies: func(string) bool { return true },
		check: func(n ast.Node) string {
			if pkg, fn := calledSelector(n); pkg == "zap" && (fn == "L" || fn == "S") {
				return "zap." + fn + "() global logger; take a *zap.Logger in Config"
			}
			return ""
		},
	},
	{
		name: "barego",
		applies: func(rel string) bool {
			return !isTest(rel) && underAny(dirOf(rel), []string{"quorum", "metadata", "legacyzk", "storage", "replica"})
		},
		check: func(n ast.Node) string {
			if g, ok := n.(*ast.GoStmt); ok {
				if _, lit := g.Call.Fun.(*ast.FuncLit); lit {
					return "bare go func; start goroutines through a tracked helper (sync.WaitGroup.Go)"
				}
			}
			return ""
		},
	},
}

func isTest(rel string) bool { return strings.HasSuffix(rel, "_test.go") }

// dirOf is the directory of a slash path.
func dirOf(rel string) string {
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		return rel[:i]
	}
	return "."
}

// calledSelector returns ("time", "Now") for a call time.Now(...).
func calledSelector(n ast.Node) (string, string) {
	call, ok := n.(*ast.CallExpr)
	if !ok {
		return "", ""
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return "", ""
	}
	id, ok := sel.X.(*ast.Ident)
	if !ok {
		return "", ""
	}
	return id.Name, sel.Sel.Name
}

var ignoreRE = regexp.MustCompile(`lint:ignore\s+([A-Za-z]+)`)

// ignoredLines maps line -> rule names exempted by a lint:ignore comment on
// that line.
func ignoredLines(fset *token.FileSet, f *ast.File) map[int]map[string]bool {
	out := make(map[int]map[string]bool)
	for _, cg := range f.Comments {
		for _, c := range cg.List {
			for _, m := range ignoreRE.FindAllStringSubmatch(c.Text, -1) {
				line := fset.Position(c.Pos()).Line
				if out[line] == nil {
					out[line] = make(map[string]bool)
				}
				out[line][strings.ToLower(m[1])] = true
			}
		}
	}
	return out
}

// sourceViolations applies every rule that covers rel to src.
func sourceViolations(rel string, src []byte) ([]string, error) {
	var rules []sourceRule
	for _, r := range sourceRules {
		if r.applies(rel) {
			rules = append(rules, r)
		}
	}
	if len(rules) == 0 {
		return nil, nil
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, rel, src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	ignored := ignoredLines(fset, f)
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		if n == nil {
			return false
		}
		for _, r := range rules {
			msg := r.check(n)
			if msg == "" {
				continue
			}
			pos := fset.Position(n.Pos())
			if !ignored[pos.Line][r.name] {
				out = append(out, fmt.Sprintf("%s:%d: [%s] %s", rel, pos.Line, r.name, msg))
			}
		}
		return true
	})
	return out, nil
}

func TestLayeringSources(t *testing.T) {
	root := moduleRoot(t)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		problems, err := sourceViolations(filepath.ToSlash(rel), src)
		if err != nil {
			// A file mid-edit by another helper may not parse; the build
			// reports that, not the lint.
			t.Logf("skipping %s: %v", rel, err)
			return nil
		}
		for _, problem := range problems {
			t.Error(problem)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
