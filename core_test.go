package postbox

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestNewIDIsMonotonicUUIDv7(t *testing.T) {
	prev := ""
	for i := 0; i < 20000; i++ {
		id := NewID()
		if len(id) != 36 || id[14] != '7' || !strings.ContainsRune("89ab", rune(id[19])) {
			t.Fatalf("%q is not a UUIDv7 with the RFC 9562 variant", id)
		}
		if id <= prev {
			t.Fatalf("IDs not increasing: %s after %s", id, prev)
		}
		prev = id
	}
	ms := int64(0)
	for _, c := range strings.ReplaceAll(prev[:13], "-", "") {
		ms = ms<<4 | int64(strings.IndexRune("0123456789abcdef", c))
	}
	if d := time.Since(time.UnixMilli(ms)); d < -time.Second || d > time.Minute {
		t.Fatalf("ID timestamp is %v away from now", d)
	}
}

func TestParseUUID(t *testing.T) {
	got, err := parseUUID("0190F6E4-3B7A-7C3D-8E4F-123456789ABC")
	if err != nil || got != "0190f6e4-3b7a-7c3d-8e4f-123456789abc" {
		t.Fatalf("parseUUID = %q, %v", got, err)
	}
	for _, bad := range []string{"", "order-1", "0190f6e4-3b7a-7c3d-8e4f-123456789abz", "0190f6e4x3b7a-7c3d-8e4f-123456789abc",
		"00-0000--0000-0000-0000-000000000000", "0190f6e4-3b7a-7c3d-8e4f-12345678-abc"} {
		if _, err := parseUUID(bad); err == nil {
			t.Errorf("parseUUID(%q) accepted", bad)
		}
	}
}

func TestBackoff(t *testing.T) {
	c := (&RelayConfig{BackoffBase: time.Second, BackoffMax: 10 * time.Second}).WithDefaults()
	for attempt, full := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 8 * time.Second, 5: 10 * time.Second, 500: 10 * time.Second} {
		for range 50 {
			d := c.Retry().Delay(attempt)
			if d > full || d < full/2 {
				t.Fatalf("backoff(%d) = %v, want between half of %v and all of it", attempt, d, full)
			}
		}
	}
	c.Backoff = func(n int) time.Duration { return time.Duration(n) * time.Minute }
	if d := c.Retry().Delay(3); d != 3*time.Minute {
		t.Fatalf("custom Backoff ignored: %v", d)
	}
}

func TestRelayConfigValidate(t *testing.T) {
	for _, cfg := range []RelayConfig{{BatchSize: -1}, {PollInterval: -time.Second}, {BackoffBase: time.Hour, BackoffMax: time.Minute}} {
		c := cfg.WithDefaults()
		if err := c.validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("validate(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
	}
	if _, err := NewRelay[int](nil, nil, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("NewRelay(nil client) = %v", err)
	}
	d := (*RelayConfig)(nil).WithDefaults()
	if d.BatchSize != DefaultBatchSize || d.PollInterval != DefaultPollInterval || d.MaxAttempts != DefaultMaxAttempts {
		t.Errorf("defaults not applied: %+v", d)
	}
}

func TestPermanentAndBatchError(t *testing.T) {
	base := errors.New("too big")
	p := Permanent(base)
	if !IsPermanent(p) || !errors.Is(p, base) || IsPermanent(base) || Permanent(nil) != nil {
		t.Fatal("Permanent does not wrap and classify")
	}
	be := &BatchError{Errs: []error{nil, p, errors.New("x")}}
	if !IsPermanent(be) || !strings.Contains(be.Error(), "2 of 3") {
		t.Fatalf("BatchError = %q", be.Error())
	}
	if truncate("héllo", 2) != "h" {
		t.Fatalf("truncate cut a character in half: %q", truncate("héllo", 2))
	}
}
