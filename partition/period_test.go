package partition

import (
	"testing"
	"time"
)

func TestPeriods(t *testing.T) {
	at := time.Date(2030, 12, 31, 23, 59, 59, 999, time.FixedZone("UTC+2", 2*3600)) // 21:59:59 UTC
	cases := []struct {
		p           Period
		floor, next time.Time
		label       string
	}{
		{Hourly, time.Date(2030, 12, 31, 21, 0, 0, 0, time.UTC), time.Date(2030, 12, 31, 22, 0, 0, 0, time.UTC), "p2030123121"},
		{Daily, time.Date(2030, 12, 31, 0, 0, 0, 0, time.UTC), time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC), "p20301231"},
		{Monthly, time.Date(2030, 12, 1, 0, 0, 0, 0, time.UTC), time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC), "p203012"},
	}
	for _, c := range cases {
		f := c.p.floor(at)
		if !f.Equal(c.floor) || !c.p.next(f).Equal(c.next) || c.p.label(f) != c.label {
			t.Errorf("%v of %v: floor %v next %v label %s; want %v, %v, %s", c.p, at, f, c.p.next(f), c.p.label(f), c.floor, c.next, c.label)
		}
		start, end, ok := parseLabel(c.label)
		if !ok || !start.Equal(c.floor) || !end.Equal(c.next) {
			t.Errorf("parseLabel(%s) = %v, %v, %v; want %v to %v", c.label, start, end, ok, c.floor, c.next)
		}
	}
	for _, bad := range []string{"pmax", "p2030", "p20301332", "p2030123125", "x20301231", "p203012311"} {
		if _, _, ok := parseLabel(bad); ok {
			t.Errorf("parseLabel(%q) accepted a label Postbox never makes", bad)
		}
	}
}
