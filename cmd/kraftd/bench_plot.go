package main

// Plots of kraftd bench: one SVG per scenario table, time against
// partitions on log scales, both modes on one chart (kraft solid, zk-legacy
// dashed, one colour per measure). Written by hand: a few lines and axes do
// not need a plotting library.

import (
	"cmp"
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kraftd/kraftd/cmd/kraftd/app"
)

// plotColours are the measures' colours, in the table's row order.
var plotColours = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"}

// plotPoint is one figure on a chart.
type plotPoint struct{ x, y float64 }

// plotSeries is one measure of one mode.
type plotSeries struct {
	label  string
	colour string
	dashed bool
	points []plotPoint
}

// plotFile is the file name of a table's chart: its metric prefix.
func plotFile(t compareTable) string {
	key := t.rows[0].key
	if i := strings.IndexByte(key, '_'); i > 0 {
		key = key[:i]
	}
	return key + ".svg"
}

// writePlots writes one SVG per table with at least one figure to dir and
// returns the files written, in table order.
func (rep *compareReport) writePlots(dir string) ([]string, error) {
	var files []string
	for _, t := range compareTables {
		svg, ok := rep.plot(t)
		if !ok {
			continue
		}
		name := plotFile(t)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(svg), 0o644); err != nil {
			return files, err
		}
		files = append(files, name)
	}
	return files, nil
}

// plot renders table t's time measures (rates have another unit and stay in
// the table) as an SVG; false when no run has one of them.
func (rep *compareReport) plot(t compareTable) (string, bool) {
	var series []plotSeries
	var capped []string
	for _, mode := range []string{string(app.ModeKRaft), string(app.ModeZKLegacy)} {
		for i, m := range t.rows {
			if m.rate || m.bytes || m.count {
				continue
			}
			s := plotSeries{label: mode + ": " + m.label, colour: plotColours[i%len(plotColours)], dashed: mode != string(app.ModeKRaft)}
			for _, r := range rep.Runs {
				if r.Mode != mode {
					continue
				}
				if v, ok := r.Metrics[m.key]; ok && v > 0 {
					s.points = append(s.points, plotPoint{float64(r.Partitions), v})
				}
			}
			slices.SortFunc(s.points, func(a, b plotPoint) int { return cmp.Compare(a.x, b.x) })
			if len(s.points) > 0 {
				series = append(series, s)
			}
		}
		for _, r := range rep.Runs {
			if r.Mode == mode && r.Status == statusCapped {
				capped = append(capped, fmt.Sprintf("%s capped at %d partitions", mode, r.Partitions))
				break
			}
		}
	}
	if len(series) == 0 {
		return "", false
	}
	xmin, xmax, ymin, ymax := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, s := range series {
		for _, p := range s.points {
			xmin, xmax = min(xmin, p.x), max(xmax, p.x)
			ymin, ymax = min(ymin, p.y), max(ymax, p.y)
		}
	}
	// Whole decades on both axes, at least one wide.
	x0, x1 := math.Floor(math.Log10(xmin)), math.Ceil(math.Log10(xmax))
	y0, y1 := math.Floor(math.Log10(ymin)), math.Ceil(math.Log10(ymax))
	if x1 == x0 {
		x1++
	}
	if y1 == y0 {
		y1++
	}
	const (
		width, left, right, top, plotH = 760.0, 80.0, 20.0, 50.0, 340.0
		legendLine                     = 18.0
	)
	plotW := width - left - right
	legendTop := top + plotH + 50
	height := legendTop + legendLine*float64(len(series)+len(capped)) + 10
	px := func(x float64) float64 { return left + (math.Log10(x)-x0)/(x1-x0)*plotW }
	py := func(y float64) float64 { return top + plotH - (math.Log10(y)-y0)/(y1-y0)*plotH }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n",
		width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="22" font-size="14" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(t.title))
	fmt.Fprintf(&b, `<text x="%.0f" y="40" fill="#555">kraft solid, zk-legacy dashed; both axes logarithmic</text>`+"\n", left)
	// Grid and tick labels at each decade.
	for e := x0; e <= x1; e++ {
		x := left + (e-x0)/(x1-x0)*plotW
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x, top, x, top+plotH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x, top+plotH+16, countLabel(math.Pow(10, e)))
	}
	for e := y0; e <= y1; e++ {
		y := top + plotH - (e-y0)/(y1-y0)*plotH
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, y, left+plotW, y)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, y+4, msLabel(math.Pow(10, e)))
	}
	fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#333"/>`+"\n", left, top, plotW, plotH)
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">partitions</text>`+"\n", left+plotW/2, top+plotH+34)
	fmt.Fprintf(&b, `<text transform="translate(18 %.1f) rotate(-90)" text-anchor="middle">time</text>`+"\n", top+plotH/2)
	for i, s := range series {
		dash := ""
		if s.dashed {
			dash = ` stroke-dasharray="7 4"`
		}
		var pts []string
		for _, p := range s.points {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(p.x), py(p.y)))
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(pts, " "), s.colour, dash)
		for _, p := range s.points {
			marker := fmt.Sprintf(`<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>`, px(p.x), py(p.y), s.colour)
			if s.dashed {
				marker = fmt.Sprintf(`<rect x="%.1f" y="%.1f" width="7" height="7" fill="white" stroke="%s" stroke-width="1.5"/>`, px(p.x)-3.5, py(p.y)-3.5, s.colour)
			}
			fmt.Fprintf(&b, "%s\n", marker)
		}
		y := legendTop + legendLine*float64(i)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/>`+"\n", left, y-4, left+36, y-4, s.colour, dash)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", left+44, y, html.EscapeString(s.label))
	}
	for i, c := range capped {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="#a00">%s (a point there was measured before the cap; none beyond)</text>`+"\n", left, legendTop+legendLine*float64(len(series)+i), html.EscapeString(c))
	}
	b.WriteString("</svg>\n")
	return b.String(), true
}

// countLabel names a partition count: 100, 1k, 10k, 1M.
func countLabel(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%gk", v/1e3)
	}
	return fmt.Sprintf("%g", v)
}

// msLabel names a time in milliseconds: 0.1 ms, 10 ms, 1 s, 100 s.
func msLabel(ms float64) string {
	if ms >= 1000 {
		return fmt.Sprintf("%g s", ms/1000)
	}
	return fmt.Sprintf("%g ms", ms)
}
