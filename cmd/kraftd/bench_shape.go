package main

// The shape kraftd bench --quick asserts (issue 17): a controller failover's
// recovery after detection stays flat with the partition count in KRaft and
// grows with it in the ZooKeeper era. Only the shape, never a time: on a
// shared 2-core machine the times move with the load, the shape does not.
//
// Why these tests and margins. Measured on this machine under a load average
// near 20 (other builds running), recovery after detection at 100, 1000 and
// 5000 partitions was 83, 783 and 715 ms in KRaft (the spread is the brokers
// re-finding the quorum leader and the scheduler, not the partitions) and
// 0.78 s and 4.26 s at 100 and 1000 in zk-legacy (the new controller
// re-elects the dead one's partitions with a forceSync write to a 3-server
// ensemble each, and sends every partition's state to every broker). So:
//   - the slope of each mode is a least-squares fit over every size that
//     ran (three in --quick), in ms per 1000 partitions: one noisy size
//     moves it less than a two-point difference would;
//   - zk-legacy must be clearly positive: its fitted growth across the range
//     at least its fitted value at the smallest size (the growth is about 5x
//     that here; a machine ten times faster still shows 2x), and its
//     largest size at least twice its smallest;
//   - KRaft must be near zero: its fitted growth across the range within a
//     fixed allowance for noise (shapeNoiseMs, above any spread seen here)
//     or within a quarter of zk-legacy's growth, whichever is larger. A
//     KRaft whose recovery were linear in the partitions the way
//     zk-legacy's is fails both.

import (
	"fmt"
	"slices"

	"github.com/kraftd/kraftd/cmd/kraftd/app"
)

// shapeMetric is the figure whose shape is asserted.
const shapeMetric = "failover_after_detection_ms"

// shapeNoiseMs is the growth across the range that KRaft may show from noise
// alone: above the 60-900 ms spread measured at any size on 2 loaded cores
// (four runs).
const shapeNoiseMs = 1500.0

// shapeVerdict is the outcome of the shape check.
type shapeVerdict struct {
	OK    bool     `json:"ok"`
	Lines []string `json:"lines"`
}

// fitSlope is the least-squares slope of ys against xs.
func fitSlope(xs, ys []float64) float64 {
	n := float64(len(xs))
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}

// modeSeries is one mode's shape figure at each size that has it, by size.
func (rep *compareReport) modeSeries(mode string) (xs, ys []float64) {
	var runs []*modeRun
	for _, r := range rep.Runs {
		if _, ok := r.Metrics[shapeMetric]; ok && r.Mode == mode && r.Status == statusOK {
			runs = append(runs, r)
		}
	}
	slices.SortFunc(runs, func(a, b *modeRun) int { return a.Partitions - b.Partitions })
	for _, r := range runs {
		xs = append(xs, float64(r.Partitions))
		ys = append(ys, r.Metrics[shapeMetric])
	}
	return xs, ys
}

// checkShape applies the tests above to the report.
func (rep *compareReport) checkShape() shapeVerdict {
	v := shapeVerdict{OK: true}
	fail := func(format string, args ...any) {
		v.OK = false
		v.Lines = append(v.Lines, "FAIL: "+fmt.Sprintf(format, args...))
	}
	kx, ky := rep.modeSeries(string(app.ModeKRaft))
	zx, zy := rep.modeSeries(string(app.ModeZKLegacy))
	if len(kx) < 2 || len(zx) < 2 {
		fail("recovery after detection at %d kraft and %d zk-legacy sizes; the shape needs both modes at 2 sizes or more", len(kx), len(zx))
		return v
	}
	ks, zs := fitSlope(kx, ky), fitSlope(zx, zy)
	kGrowth := ks * (kx[len(kx)-1] - kx[0])
	zGrowth := zs * (zx[len(zx)-1] - zx[0])
	zFirst := zy[0]
	v.Lines = append(v.Lines,
		fmt.Sprintf("recovery after detection, least-squares slope: kraft %.1f ms, zk-legacy %.1f ms per 1000 partitions", ks*1000, zs*1000),
		fmt.Sprintf("fitted growth from %.0f to %.0f partitions: kraft %.0f ms, zk-legacy %.0f ms", zx[0], zx[len(zx)-1], kGrowth, zGrowth))
	if zGrowth < zFirst || zs <= 0 {
		fail("zk-legacy's growth (%.0f ms) is below its own figure at %.0f partitions (%.0f ms): not clearly positive", zGrowth, zx[0], zFirst)
	}
	if zy[len(zy)-1] < 2*zy[0] {
		fail("zk-legacy at %.0f partitions (%.0f ms) is not twice its figure at %.0f (%.0f ms)", zx[len(zx)-1], zy[len(zy)-1], zx[0], zy[0])
	}
	if allowed := max(shapeNoiseMs, zGrowth/4); kGrowth > allowed {
		fail("kraft's growth (%.0f ms) is above the larger of the noise allowance (%.0f ms) and a quarter of zk-legacy's (%.0f ms): not flat", kGrowth, shapeNoiseMs, zGrowth/4)
	}
	if v.OK {
		v.Lines = append(v.Lines, fmt.Sprintf("shape holds: kraft flat (growth within max(%.0f ms noise, a quarter of zk-legacy's)), zk-legacy growing", shapeNoiseMs))
	}
	return v
}
