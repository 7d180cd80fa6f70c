package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver"
)

// Names of the tables the scenarios make. They are dropped before and after each scenario.
const domainTable = "bench_orders"

// outboxCols are the columns a record is written with, in the order of the rows recordRow returns.
var outboxCols = []string{"id", "topic", "key", "type", "payload", "headers", "available_at", "created_at"}

// recordCols is the select list the relay reads a record with, so that the baselines read the same.
func recordCols(dialect string) string {
	switch dialect {
	case "postgres":
		return "id::text, topic, key, type, payload, headers::text, status, attempts, last_error, available_at, created_at, published_at"
	case "mysql":
		return "id, topic, `key`, type, payload, headers, status, attempts, last_error, available_at, created_at, published_at"
	}
	return "id, topic, key, type, payload, headers, status, attempts, last_error, available_at, created_at, published_at"
}

// newOutbox drops and recreates the table set called name and returns a client on it.
func newOutbox[TTx any](ctx context.Context, t *target[TTx], c *conns[TTx], name string, cfg postbox.Config) (*postbox.Client[TTx], error) {
	if err := dropOutbox(ctx, t, c, name); err != nil {
		return nil, err
	}
	cfg.Table, cfg.InboxTable = name, name+"_inbox"
	client, err := postbox.NewClient(c.drv, &cfg)
	if err != nil {
		return nil, err
	}
	if _, err := client.Migrate(ctx); err != nil {
		return nil, err
	}
	return client, nil
}

// sameClient returns a client on the table set of an existing client, through another pool.
func sameClient[TTx any](c *conns[TTx], of *postbox.Client[TTx], change func(*postbox.Config)) (*postbox.Client[TTx], error) {
	cfg := of.Config()
	if change != nil {
		change(&cfg)
	}
	return postbox.NewClient(c.drv, &cfg)
}

func dropOutbox[TTx any](ctx context.Context, t *target[TTx], c *conns[TTx], name string) error {
	for _, tbl := range []string{name, driver.Derived(name, "_migrations"), name + "_inbox", driver.Derived(name+"_inbox", "_failures"),
		driver.Derived(name+"_inbox", "_stripes")} {
		if _, err := c.exec(ctx, "DROP TABLE IF EXISTS "+tbl); err != nil {
			return fmt.Errorf("drop %s: %w", tbl, err)
		}
	}
	return nil
}

// newDomainTable recreates the table the business transactions write to.
func newDomainTable[TTx any](ctx context.Context, t *target[TTx], c *conns[TTx]) error {
	if _, err := c.exec(ctx, "DROP TABLE IF EXISTS "+domainTable); err != nil {
		return err
	}
	ddl := "CREATE TABLE " + domainTable + " (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, customer text NOT NULL," +
		" amount bigint NOT NULL, created_at timestamptz NOT NULL DEFAULT now())"
	switch t.dialect {
	case "sqlite":
		ddl = "CREATE TABLE " + domainTable + " (id INTEGER PRIMARY KEY AUTOINCREMENT, customer TEXT NOT NULL," +
			" amount INTEGER NOT NULL, created_at INTEGER NOT NULL DEFAULT (unixepoch()))"
	case "mysql":
		ddl = "CREATE TABLE " + domainTable + " (id BIGINT AUTO_INCREMENT PRIMARY KEY, customer VARCHAR(255) NOT NULL," +
			" amount BIGINT NOT NULL, created_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)) ENGINE = InnoDB"
	}
	_, err := c.exec(ctx, ddl)
	return err
}

// openDomain opens n connections, makes the domain table and an outbox table with the scenarios' client
// configuration, and returns them with the client on it. cleanup drops the outbox table and closes the connections;
// on an error, what was made is undone before openDomain returns.
func openDomain[TTx any](ctx context.Context, t *target[TTx], o Options, n int, table string) (c *conns[TTx], client *postbox.Client[TTx], cleanup func(), err error) {
	c, err = t.open(ctx, n)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := newDomainTable(ctx, t, c); err != nil {
		c.close()
		return nil, nil, nil, err
	}
	client, err = newOutbox(ctx, t, c, table, o.clientConfig())
	if err != nil {
		c.close()
		return nil, nil, nil, err
	}
	return c, client, func() {
		dropOutbox(context.WithoutCancel(ctx), t, c, table)
		c.close()
	}, nil
}

// insertDomain is the business write of every producer transaction.
func insertDomain[TTx any](t *target[TTx]) string {
	return "INSERT INTO " + domainTable + " (customer, amount) VALUES (" + t.ph(1) + ", " + t.ph(2) + ")"
}

// message returns the event for sequence number seq: a JSON payload of the configured size on one of the keys.
func (o Options) message(seq int) postbox.Message {
	p := make([]byte, 0, o.PayloadBytes)
	p = fmt.Appendf(p, `{"seq":%d,"pad":"`, seq)
	for len(p) < o.PayloadBytes-2 {
		p = append(p, 'x')
	}
	p = append(p, `"}`...)
	return postbox.Message{Topic: o.Topic, Type: "order.created", Key: "key-" + strconv.Itoa(seq%o.Keys), Payload: p}
}

func (o Options) messages(start, n int) []postbox.Message {
	out := make([]postbox.Message, n)
	for i := range out {
		out[i] = o.message(start + i)
	}
	return out
}

// natsStream is the name of the JetStream stream relay-nats makes for the topic.
func (o Options) natsStream() string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return unicode.ToUpper(r)
		}
		return '_'
	}, o.Topic)
}

// preload commits n events through client in transactions of 1,000, from two producers.
func preload[TTx any](ctx context.Context, client *postbox.Client[TTx], o Options) error {
	n := o.Events
	const perTx, producers = 1000, 2
	var next atomic.Int64
	return inParallel(producers, func() error {
		for {
			start := int(next.Add(perTx)) - perTx
			if start >= n || ctx.Err() != nil {
				return ctx.Err()
			}
			msgs := o.messages(start, min(perTx, n-start))
			if err := client.InTx(ctx, func(ctx context.Context, tx TTx) error {
				return client.EnqueueBatch(ctx, tx, msgs)
			}); err != nil {
				return err
			}
		}
	})
}

// copyTable fills table dst, of the same shape as src, with src's rows, on the server.
func copyTable[TTx any](ctx context.Context, t *target[TTx], c *conns[TTx], src, dst string) error {
	cols := t.cols([]string{"id", "topic", "key", "type", "payload", "headers", "status", "attempts", "last_error",
		"available_at", "created_at", "published_at"})
	_, err := c.exec(ctx, "INSERT INTO "+dst+" ("+cols+") SELECT "+cols+" FROM "+src)
	return err
}

// settle vacuums and analyses the tables and flushes dirty pages, so that a measurement starts from the same
// state as its baseline and no checkpoint lands in it.
func settle[TTx any](ctx context.Context, t *target[TTx], c *conns[TTx], tables ...string) error {
	for _, tbl := range tables {
		q := "VACUUM (ANALYZE) " + tbl
		switch t.dialect {
		case "sqlite":
			q = "ANALYZE " + tbl
		case "mysql":
			q = "ANALYZE TABLE " + tbl
		}
		if _, err := c.exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	switch t.dialect {
	case "postgres":
		_, _ = c.exec(ctx, "CHECKPOINT") // needs superuser or pg_checkpoint; without it the run is only noisier
	case "sqlite":
		_, _ = c.exec(ctx, "PRAGMA wal_checkpoint(TRUNCATE)")
	}
	return nil
}

var noopPublisher = postbox.PublisherFunc(func(context.Context, []postbox.Record) error { return nil })

// drain runs relay until it has published n messages, stops it, and returns how long that took, the stop included:
// a relay stopping publishes the batches it holds, which Stats counts, so their time counts too.
func drain(ctx context.Context, relay *postbox.Relay, n int64) (time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- relay.Run(ctx) }()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	last, lastChange := int64(0), time.Now()
	for {
		select {
		case err := <-done:
			return 0, fmt.Errorf("relay stopped early: %v", err)
		case <-tick.C:
		}
		st := relay.Stats()
		if st.Published >= n {
			cancel()
			err := <-done
			return time.Since(start), err
		}
		if st.Published != last {
			last, lastChange = st.Published, time.Now()
		} else if time.Since(lastChange) > 30*time.Second {
			cancel()
			<-done
			return 0, fmt.Errorf("relay stalled at %d of %d published (%+v)", st.Published, n, st)
		}
	}
}

// rssSampler records the process's peak resident memory while it runs.
type rssSampler struct {
	stop chan struct{}
	wg   sync.WaitGroup
	peak atomic.Int64
}

func sampleRSS() *rssSampler {
	s := &rssSampler{stop: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			if v := readRSS(); v > s.peak.Load() {
				s.peak.Store(v)
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// Stop ends sampling and returns the peak in MiB, or -1 where /proc is missing.
func (s *rssSampler) Stop() float64 {
	close(s.stop)
	s.wg.Wait()
	if s.peak.Load() < 0 {
		return -1
	}
	return float64(s.peak.Load()) / (1 << 20)
}

// readRSS returns the resident set size in bytes, or -1.
func readRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return -1
			}
			return kb << 10
		}
	}
	return -1
}

// inParallel runs fn in n goroutines and returns the first error any returned, once all have returned.
func inParallel(n int, fn func() error) error {
	errs := make(chan error, n)
	for range n {
		go func() { errs <- fn() }()
	}
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// interleave gives each contestant its share of total events in turns, alternating which goes first, so that all
// meet the same load on a shared machine, and returns each one's events per second. A contestant handles at least
// its share, and everything left in its last turn, and reports how many events it handled in how much time.
func interleave(turns int, total int64, contestants ...func(share int64, last bool) (int64, time.Duration, error)) ([]float64, error) {
	done := make([]int64, len(contestants))
	spent := make([]time.Duration, len(contestants))
	share := total / int64(turns)
	for turn := range turns {
		for k := range contestants {
			i := (k + turn) % len(contestants)
			n, d, err := contestants[i](share, turn == turns-1)
			if err != nil {
				return nil, err
			}
			done[i] += n
			spent[i] += d
		}
	}
	out := make([]float64, len(contestants))
	for i := range out {
		out[i] = rate(done[i], spent[i])
	}
	return out, nil
}

// timed adapts a contestant that does not time itself.
func timed(f func(share int64, last bool) (int64, error)) func(int64, bool) (int64, time.Duration, error) {
	return func(share int64, last bool) (int64, time.Duration, error) {
		start := time.Now()
		n, err := f(share, last)
		return n, time.Since(start), err
	}
}
