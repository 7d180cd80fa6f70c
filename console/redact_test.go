package console

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestRedactExceptInput: an error is redacted except where it quotes the request's own input, and a word of the
// input that is part of a secret does not keep the rest of the secret from redaction.
func TestRedactExceptInput(t *testing.T) {
	c := &Console{redact: newRedactor([]string{"deadbeef1234"})}
	for _, tc := range []struct{ target, err, want string }{
		{"/dead/main/x", "dial: password deadbeef1234 refused", "dial: password xxxxx refused"},
		{"/find?q=deadbeef1234", `key "deadbeef1234" not found`, `key "deadbeef1234" not found`},
		// An occurrence equal to the input cannot be told from a quote of it: it is kept (see errText).
		{"/find?q=deadbeef1234", `key "deadbeef1234" not found; dial: deadbeef1234`, `key "deadbeef1234" not found; dial: deadbeef1234`},
		{"/find?q=deadbeef", `key "deadbeef" not found; dial: deadbeef1234`, `key "deadbeef" not found; dial: xxxxx`},
		{"/find?q=beef1234", "dial: deadbeef1234", "dial: xxxxx"},
	} {
		r := httptest.NewRequest("GET", tc.target, nil)
		_ = r.ParseForm()
		if got := c.errText(r, errors.New(tc.err)); got != tc.want {
			t.Errorf("%s: errText(%q) = %q, want %q", tc.target, tc.err, got, tc.want)
		}
	}
	if got := c.redact.text("a deadbeef1234 b"); strings.Contains(got, "beef") {
		t.Errorf("text = %q", got)
	}
}
