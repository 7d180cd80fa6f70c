package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// DefaultStartTimeout is how long the relay waits at start for every broker to answer (--start-timeout).
const DefaultStartTimeout = 10 * time.Second

// startRetryEvery is how often the start-up check pings a broker that has not answered yet.
const startRetryEvery = 250 * time.Millisecond

// checkBrokers pings every broker until each one answers or timeout passes, and returns an error naming each
// broker that never answered, with the last reason it gave. A relay that starts without its brokers would
// fail every publish with a message that hides the cause (or, for some brokers, say nothing until a message
// is pending): it is better to fail at start, where the operator looks.
func checkBrokers(ctx context.Context, conns []*brokerConn, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	errs := make([]error, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		if c.ping == nil {
			continue
		}
		wg.Go(func() { errs[i] = pingUntil(ctx, c.ping) })
	}
	wg.Wait()
	var lines []string
	unreachable := false
	for i, err := range errs {
		var refused *refusedError
		switch {
		case err == nil:
		case errors.As(err, &refused):
			lines = append(lines, fmt.Sprintf("broker %s refused the relay: %v; %s", conns[i].name, refused.err, refused.fix))
		default:
			unreachable = true
			lines = append(lines, fmt.Sprintf("broker %s is unreachable: %v", conns[i].name, err))
		}
	}
	if len(lines) == 0 {
		return nil
	}
	if !unreachable {
		return errors.New(strings.Join(lines, "\n"))
	}
	return fmt.Errorf("%s\n(checked for %v at start; set --start-timeout to wait longer)", strings.Join(lines, "\n"), timeout)
}

// refusedError is a broker's answer that no retry changes, such as refused credentials: the start-up check
// reports it at once, with fix, instead of pinging until --start-timeout and calling the broker unreachable.
type refusedError struct {
	err error
	fix string
}

func (e *refusedError) Error() string { return e.err.Error() + "; " + e.fix }
func (e *refusedError) Unwrap() error { return e.err }

// pingUntil pings until ping succeeds or ctx is done, and returns the last reason a ping gave: a ping cut short
// by the deadline does not hide the reason the one before gave.
func pingUntil(ctx context.Context, ping func(context.Context) error) error {
	t := time.NewTicker(startRetryEvery)
	defer t.Stop()
	var last error
	for {
		err := ping(ctx)
		var refused *refusedError
		if err == nil || errors.As(err, &refused) {
			return err
		}
		if last == nil || ctx.Err() == nil || !errors.Is(err, ctx.Err()) {
			last = err
		}
		select {
		case <-ctx.Done():
			if errors.Is(last, ctx.Err()) {
				return fmt.Errorf("no answer: %w", last)
			}
			return last
		case <-t.C:
		}
	}
}
