package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestUsage: a wrong flag or a stray argument exits 2 and says what was wrong, before anything connects.
func TestUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--sourcez", "3"}, "flag provided but not defined: -sourcez"},
		{[]string{"--sources", "3", "extra"}, `unexpected argument "extra"`},
	} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), c.args, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errOut.String(), c.want)
		}
	}
}
