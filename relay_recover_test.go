package postbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

func TestErrorBackoffDefaults(t *testing.T) {
	if c := (&RelayConfig{}).WithDefaults(); c.ErrorBackoffBase != DefaultErrorBackoffBase || c.ErrorBackoffMax != DefaultErrorBackoffMax {
		t.Errorf("defaults %v..%v, want %v..%v", c.ErrorBackoffBase, c.ErrorBackoffMax, DefaultErrorBackoffBase, DefaultErrorBackoffMax)
	}
	// Setting only one end never makes a config that validate refuses.
	for _, cfg := range []RelayConfig{{ErrorBackoffMax: 50 * time.Millisecond}, {ErrorBackoffBase: 5 * time.Second}} {
		c := cfg.WithDefaults()
		if err := c.validate(); err != nil || c.ErrorBackoffMax < c.ErrorBackoffBase {
			t.Errorf("%+v gave %v..%v: %v", cfg, c.ErrorBackoffBase, c.ErrorBackoffMax, err)
		}
	}
	c := (&RelayConfig{ErrorBackoffBase: 2 * time.Second, ErrorBackoffMax: time.Second}).WithDefaults()
	if err := c.validate(); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("ErrorBackoffMax below ErrorBackoffBase: validate = %v, want ErrInvalidConfig", err)
	}
}

// sqlStateError is what pgconn.PgError looks like to the core.
type sqlStateError string

func (e sqlStateError) Error() string {
	return "FATAL: the database system is starting up (SQLSTATE " + string(e) + ")"
}
func (e sqlStateError) SQLState() string { return string(e) }

func TestNotYetIsStartingUpOrRefused(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, err := range []error{refused, fmt.Errorf("claim: %w", refused), fmt.Errorf("connect: %w", sqlStateError("57P03"))} {
		if !notYet(err) {
			t.Errorf("notYet(%v) = false, want true", err)
		}
	}
	for _, err := range []error{errors.New("unexpected EOF"), sqlStateError("42P01"), context.DeadlineExceeded} {
		if notYet(err) {
			t.Errorf("notYet(%v) = true, want false: it must make the delay grow", err)
		}
	}
}

func TestIsUnavailable(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, err := range []error{Unavailable(errors.New("not connected")), fmt.Errorf("publish: %w", context.DeadlineExceeded), refused} {
		if !IsUnavailable(err) {
			t.Errorf("IsUnavailable(%v) = false, want true", err)
		}
	}
	for _, err := range []error{errors.New("no stream for subject"), Permanent(errors.New("too large"))} {
		if IsUnavailable(err) {
			t.Errorf("IsUnavailable(%v) = true, want false", err)
		}
	}
	if Unavailable(nil) != nil {
		t.Error("Unavailable(nil) is not nil")
	}
}

func TestOneLine(t *testing.T) {
	err := errors.New("claim: unexpected EOF\nfailed to deallocate cached statement(s): conn closed\r\n")
	if got, want := oneLine(err), "claim: unexpected EOF; failed to deallocate cached statement(s): conn closed"; got != want {
		t.Errorf("oneLine = %q, want %q", got, want)
	}
}
