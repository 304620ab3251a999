package main

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// kraftdFeatures runs `kraftd features args...` and returns its stdout and stderr
// and whether it exited 0.
func kraftdFeatures(t *testing.T, bin string, args ...string) (stdout, stderr string, ok bool) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"features"}, args...)...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if _, exit := err.(*exec.ExitError); err != nil && !exit {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), err == nil
}

// TestProcessFeaturesMetadataVersion: `kraftd features` against three static
// controllers and a broker, real processes. describe --bootstrap-controller asks the
// active controller (and says so), describe --bootstrap-server the broker; upgrade
// --metadata 3.9 is refused with the controllers' range and a hint; a dry run, then
// the upgrade to 3.7-IV1, which the broker then shows; a downgrade across a format
// change is refused, a safe one done; transaction.version cannot be finalized above
// 0, group.version can be disabled; with a controller down, an upgrade is refused
// because that controller cannot be asked.
func TestProcessFeaturesMetadataVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	bin := buildBinary(t)
	ports := []int{freePort(t), freePort(t), freePort(t), freePort(t)}
	var voters []string
	for i, port := range ports[:3] {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i+1, port))
	}
	var procs []*dynProc
	for i, port := range ports {
		role := "controller"
		if i == 3 {
			role = "broker"
		}
		procs = append(procs, newStaticProc(t, i+1, port, role, strings.Join(voters, ",")))
	}
	t.Cleanup(func() {
		for _, p := range procs {
			p.kill()
			if t.Failed() {
				t.Logf("node %d (%s) output (tail):\n%s", p.id, p.role, tail(p.out.String(), 30))
			}
		}
	})
	for _, p := range procs {
		p.format(t, bin, "")
		p.start(t, bin)
	}
	c1, c3, b4 := procs[0], procs[2], procs[3]
	mvLine := func(finalized string) string {
		return "Feature: metadata.version\tSupportedMinVersion: %s\tSupportedMaxVersion: %s\tFinalizedVersionLevel: " + finalized + "\t"
	}
	controllerLine := fmt.Sprintf(mvLine("3.6-IV2"), "3.0-IV1", "3.7-IV1")
	eventually(t, "describe from the active controller", 20*time.Second, func() bool {
		out, errOut, ok := kraftdFeatures(t, bin, "describe", "--bootstrap-controller", c3.addr())
		return ok && strings.Contains(out, controllerLine) && strings.Contains(errOut, "Asked the active controller")
	})

	out, _, ok := kraftdFeatures(t, bin, "upgrade", "--bootstrap-controller", c1.addr(), "--metadata", "3.9")
	if ok || !strings.Contains(out, "Could not upgrade metadata.version to 21.") || !strings.Contains(out, "only supports versions 1-16") ||
		!strings.Contains(out, "Hint: every controller and every registered broker must support the level") {
		t.Fatalf("upgrade to 3.9: ok %t\n%s", ok, out)
	}
	eventually(t, "a dry run of the upgrade to 3.7-IV1 through the broker", 10*time.Second, func() bool {
		out, _, ok := kraftdFeatures(t, bin, "upgrade", "--bootstrap-server", b4.addr(), "--metadata", "3.7-IV1", "--dry-run")
		return ok && strings.Contains(out, "metadata.version can be upgraded to 16.")
	})
	if out, _, ok := kraftdFeatures(t, bin, "upgrade", "--bootstrap-controller", c1.addr(), "--metadata", "3.7-IV1"); !ok ||
		!strings.Contains(out, "metadata.version was upgraded to 16.") {
		t.Fatalf("upgrade to 3.7-IV1: ok %t\n%s", ok, out)
	}
	brokerLine := fmt.Sprintf(mvLine("3.7-IV1"), "3.3-IV3", "3.9-IV0")
	eventually(t, "the broker shows 3.7-IV1", 10*time.Second, func() bool {
		out, errOut, ok := kraftdFeatures(t, bin, "describe", "--bootstrap-server", b4.addr())
		return ok && strings.Contains(out, brokerLine) && strings.Contains(errOut, "Asked broker")
	})

	out, _, ok = kraftdFeatures(t, bin, "downgrade", "--bootstrap-controller", c1.addr(), "--release-version", "3.6")
	if ok || !strings.Contains(out, "might delete metadata information") || !strings.Contains(out, "Hint: a metadata.version in between changed the record formats") {
		t.Fatalf("downgrade to 3.6: ok %t\n%s", ok, out)
	}
	if out, _, ok := kraftdFeatures(t, bin, "downgrade", "--bootstrap-controller", c1.addr(), "--metadata", "3.7-IV0"); !ok ||
		!strings.Contains(out, "metadata.version was downgraded to 15.") {
		t.Fatalf("downgrade to 3.7-IV0: ok %t\n%s", ok, out)
	}
	out, _, ok = kraftdFeatures(t, bin, "upgrade", "--bootstrap-controller", c1.addr(), "--feature", "transaction.version=2")
	if ok || !strings.Contains(out, "Local controller") || !strings.Contains(out, "does not support this feature.") {
		t.Fatalf("upgrade of transaction.version: ok %t\n%s", ok, out)
	}
	if out, _, ok := kraftdFeatures(t, bin, "disable", "--bootstrap-controller", c1.addr(), "--feature", "group.version"); !ok ||
		!strings.Contains(out, "group.version was disabled.") {
		t.Fatalf("disable group.version: ok %t\n%s", ok, out)
	}

	c3.kill()
	eventually(t, "an upgrade refused for controller 3", 20*time.Second, func() bool {
		out, _, ok := kraftdFeatures(t, bin, "upgrade", "--bootstrap-controller", c1.addr(), "--metadata", "3.7-IV1", "--timeout", "10s")
		return !ok && strings.Contains(out, "Controller 3 could not be asked") && strings.Contains(out, "Hint: every controller must answer")
	})
}
