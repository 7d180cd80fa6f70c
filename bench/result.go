package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// Result is what one scenario measured.
type Result struct {
	Scenario string
	DB       string
	// EventsPerS is Postbox's rate and BaselinePerS the baseline's, for the same work; Ratio is EventsPerS over
	// BaselinePerS.
	EventsPerS   float64
	BaselinePerS float64
	Ratio        float64
	// Latency figures, for the latency scenario only.
	Latency *Latency
	// Extra holds the scenario's other figures by name (rates per second, sizes in MiB, counts).
	Extra map[string]float64
	// Skipped says why the scenario did not run on this database; the figures are then zero.
	Skipped string
}

// Latency is the commit-to-ack latency of a relay and its idle cost.
type Latency struct {
	P50, P99, Max time.Duration
	// IdleQueriesPerS is how many statements the idle relay sent per second; -1 when the client library cannot
	// count them.
	IdleQueriesPerS float64
}

func newResult(events, baseline float64) Result {
	r := Result{EventsPerS: events, BaselinePerS: baseline, Extra: map[string]float64{}}
	if baseline > 0 {
		r.Ratio = events / baseline
	}
	return r
}

// MarshalJSON writes the fixed fields and the extras in one flat object.
func (r Result) MarshalJSON() ([]byte, error) {
	m := map[string]any{"scenario": r.Scenario, "db": r.DB, "events_per_s": round(r.EventsPerS, 1),
		"baseline_per_s": round(r.BaselinePerS, 1), "ratio": round(r.Ratio, 3)}
	if r.Latency != nil {
		m["p50_ms"] = ms(r.Latency.P50)
		m["p99_ms"] = ms(r.Latency.P99)
		m["max_ms"] = ms(r.Latency.Max)
		m["idle_queries_per_s"] = round(r.Latency.IdleQueriesPerS, 2)
	}
	for k, v := range r.Extra {
		m[k] = round(v, 3)
	}
	if r.Skipped != "" {
		m["skipped"] = r.Skipped
	}
	return json.Marshal(m)
}

func ms(d time.Duration) float64 { return round(float64(d)/float64(time.Millisecond), 3) }

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

func (r Result) write(w io.Writer, asJSON bool) error {
	if asJSON {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-12s %-11s", r.Scenario, r.DB)
	if r.Skipped != "" {
		fmt.Fprintf(&b, " skipped: %s\n", r.Skipped)
		_, err := io.WriteString(w, b.String())
		return err
	}
	fmt.Fprintf(&b, " postbox %9.0f/s  baseline %9.0f/s  ratio %.2f", r.EventsPerS, r.BaselinePerS, r.Ratio)
	if l := r.Latency; l != nil {
		fmt.Fprintf(&b, "  p50 %.2fms p99 %.2fms max %.2fms idle %.1f q/s", ms(l.P50), ms(l.P99), ms(l.Max), l.IdleQueriesPerS)
	}
	for _, k := range slices.Sorted(maps.Keys(r.Extra)) {
		fmt.Fprintf(&b, "  %s=%s", k, strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", r.Extra[k]), "0"), "."))
	}
	b.WriteByte('\n')
	_, err := io.WriteString(w, b.String())
	return err
}

// rate returns n per second over d.
func rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// median returns a result whose every figure is the median of that figure over runs.
func median(runs []Result) Result {
	if len(runs) == 1 {
		return runs[0]
	}
	out := Result{Skipped: runs[0].Skipped, Extra: map[string]float64{}}
	pick := func(get func(Result) float64) float64 {
		v := make([]float64, len(runs))
		for i, r := range runs {
			v[i] = get(r)
		}
		slices.Sort(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	out.EventsPerS = pick(func(r Result) float64 { return r.EventsPerS })
	out.BaselinePerS = pick(func(r Result) float64 { return r.BaselinePerS })
	out.Ratio = pick(func(r Result) float64 { return r.Ratio })
	if runs[0].Latency != nil {
		dur := func(get func(*Latency) time.Duration) time.Duration {
			return time.Duration(pick(func(r Result) float64 { return float64(get(r.Latency)) }))
		}
		out.Latency = &Latency{P50: dur(func(l *Latency) time.Duration { return l.P50 }),
			P99: dur(func(l *Latency) time.Duration { return l.P99 }), Max: dur(func(l *Latency) time.Duration { return l.Max }),
			IdleQueriesPerS: pick(func(r Result) float64 { return r.Latency.IdleQueriesPerS })}
	}
	for k := range runs[0].Extra {
		out.Extra[k] = pick(func(r Result) float64 { return r.Extra[k] })
	}
	out.Extra["runs"] = float64(len(runs))
	return out
}
