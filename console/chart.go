package console

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"strings"
	"time"
)

// series is one line of a chart.
type series struct {
	Name   string
	Class  string // the line's CSS class, which sets its colour
	Points []point
}

type point struct {
	At time.Time
	V  float64
}

// chart draws series as an inline SVG line chart over [from, to]: a light grid, the y axis's top value, the time
// axis's ends, and a legend. Labels are escaped; everything else is numbers.
func chart(title string, ss []series, from, to time.Time) template.HTML {
	const w, h, left, right, top, bottom = 1200.0, 230.0, 56.0, 16.0, 30.0, 26.0
	max := 0.0
	for _, s := range ss {
		for _, p := range s.Points {
			max = math.Max(max, p.V)
		}
	}
	max = 4 * niceCeil(max/4) // four grid steps of 1, 2 or 5 times a power of ten
	span := to.Sub(from).Seconds()
	x := func(t time.Time) float64 { return left + (w-left-right)*math.Max(0, t.Sub(from).Seconds())/span }
	y := func(v float64) float64 { return top + (h-top-bottom)*(1-v/max) }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %g %g" role="img" aria-label="%s">`, w, h, html.EscapeString(title))
	for i := 0; i <= 4; i++ {
		v := max * float64(i) / 4
		fmt.Fprintf(&b, `<line class="grid" x1="%g" x2="%g" y1="%.1f" y2="%.1f"/>`, left, w-right, y(v), y(v))
		fmt.Fprintf(&b, `<text class="tick" x="%g" y="%.1f" text-anchor="end">%s</text>`, left-6, y(v)+4, html.EscapeString(shortNum(v)))
	}
	fmt.Fprintf(&b, `<text class="tick" x="%g" y="%g">−%s</text>`, left, h-6, html.EscapeString(strings.TrimSuffix(age(to.Sub(from)), " 00s")))
	fmt.Fprintf(&b, `<text class="tick" x="%g" y="%g" text-anchor="end">now</text>`, w-right, h-6)
	for i, s := range ss {
		if len(s.Points) > 0 {
			var pts strings.Builder
			for _, p := range s.Points {
				fmt.Fprintf(&pts, "%.1f,%.1f ", x(p.At), y(p.V))
			}
			if len(s.Points) == 1 {
				p := s.Points[0]
				fmt.Fprintf(&b, `<circle class="line %s" cx="%.1f" cy="%.1f" r="2.5"/>`, s.Class, x(p.At), y(p.V))
			}
			fmt.Fprintf(&b, `<polyline class="line %s" points="%s"/>`, s.Class, strings.TrimSpace(pts.String()))
		}
		lx := left + float64(i)*140
		fmt.Fprintf(&b, `<rect class="swatch %s" x="%g" y="8" width="14" height="4" rx="2"/>`, s.Class, lx)
		fmt.Fprintf(&b, `<text class="legend" x="%g" y="14">%s</text>`, lx+20, html.EscapeString(s.Name))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) //nolint:gosec // numbers and escaped labels only
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten, so that the axis reads well; at least 1 (counts and
// rates below one a second need no finer grid).
func niceCeil(v float64) float64 {
	if v <= 1 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func shortNum(v float64) string {
	switch {
	case v >= 1e6:
		return trimZero(fmt.Sprintf("%.1fM", v/1e6))
	case v >= 1e3:
		return trimZero(fmt.Sprintf("%.1fk", v/1e3))
	case v == math.Trunc(v):
		return fmt.Sprintf("%d", int64(v))
	default:
		return fmt.Sprintf("%.1f", v)
	}
}

func trimZero(s string) string { return strings.Replace(s, ".0", "", 1) }
