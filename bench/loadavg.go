package bench

import (
	"os"
	"strconv"
	"strings"
)

// loadAvg returns the machine's one-minute load average from /proc/loadavg, or -1 where it cannot be read. Each
// result carries it: on a shared machine a figure means little without the load it was measured under.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f, _, _ := strings.Cut(string(b), " ")
	v, err := strconv.ParseFloat(f, 64)
	if err != nil {
		return -1
	}
	return v
}
