package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The daemon recovery scenarios measure the recovery of `postbox relay`, the binary users deploy, run with its
// default flags (only the database, tables, broker and a JSON debug log are given): after each restart of its
// broker, or of its database, the time from the server accepting connections again to each daemon's first
// published batch (read from the daemon's log as it is written), and the time to drain a backlog that fell due
// during the outage, against the time the same backlog takes with no outage. They fail when the 99th percentile
// of the first, over every daemon and restart, is over the outage's bound (250 ms after a broker restart; after a
// PostgreSQL restart, maxResume, the bound TestRecoveryPostgres holds library relays to: the relay's database
// recovery is the core's, and a cluster just out of crash recovery answers its first sessions slowly on a loaded
// machine), or a drain takes more than twice as long as without the outage.

const maxBrokerResume = 250 * time.Millisecond

// daemonOutage is what a scenario restarts: stop takes the server down for good (until start), and accepting
// reports whether it accepts connections (a TCP connection for a broker; a PostgreSQL session for PostgreSQL,
// which refuses sessions while it recovers).
type daemonOutage struct {
	fault     string        // what stop does, for the report
	bound     time.Duration // the p99 of the first publish after the server accepts connections again
	stop      func()
	start     func(ctx context.Context) error
	accepting func(ctx context.Context) bool
}

// tcpAccepting returns an accepting function that connects to addr.
func tcpAccepting(addr string) func(ctx context.Context) bool {
	return func(ctx context.Context) bool {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return false
		}
		_ = c.Close()
		return true
	}
}

// killed is the outage of a server killed with SIGKILL and started again on its port.
func killed(name string, s interface {
	Stop(syscall.Signal)
	Start(ctx context.Context) error
	Addr() string
}) daemonOutage {
	return daemonOutage{fault: name + " killed with SIGKILL", bound: maxBrokerResume, stop: func() { s.Stop(syscall.SIGKILL) }, start: s.Start,
		accepting: tcpAccepting(s.Addr())}
}

// TestDaemonRecovery: for each broker whose server the suite runs (a nats-server, a RabbitMQ node, a
// redis-server and a Mosquitto of the scenario's own), and for PostgreSQL, the server is killed (PostgreSQL:
// pg_ctl -m immediate) and started again several times under running `postbox relay` daemons.
func TestDaemonRecovery(t *testing.T) {
	bin := buildDaemon(t)
	outages := size([]time.Duration{2500 * time.Millisecond, 3 * time.Second, 2500 * time.Millisecond},
		[]time.Duration{2500 * time.Millisecond, 3 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 2500 * time.Millisecond})
	t.Run("nats", func(t *testing.T) {
		w := newWorld(t, "daemonrecnats", worldOptions{})
		runDaemonRecovery(t, bin, w, w.nats.URL(), killed("nats-server", w.nats), outages)
	})
	t.Run("rabbitmq", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		logs := NewTail(40)
		rs, err := StartRabbitMQ(ctx, t.TempDir(), logs)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			rs.Close()
			if t.Failed() {
				t.Logf("RabbitMQ's last log lines:\n%s", logs)
			}
		})
		w := newWorld(t, "daemonrecamqp", worldOptions{broker: brokerAMQP, amqpURL: rs.URL()})
		// A node takes seconds to boot: two restarts keep the reduced suite short.
		runDaemonRecovery(t, bin, w, rs.URL(), killed("RabbitMQ", rs), size(outages[:2], outages))
	})
	t.Run("redis", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		rs, err := StartRedis(ctx, t.TempDir(), NewTail(40))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(rs.Close)
		w := newWorld(t, "daemonrecredis", worldOptions{broker: brokerNone})
		runDaemonRecovery(t, bin, w, rs.URL(), killed("redis-server", rs), outages)
	})
	t.Run("mqtt", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		ms, err := StartMosquitto(ctx, t.TempDir(), NewTail(40))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(ms.Close)
		w := newWorld(t, "daemonrecmqtt", worldOptions{broker: brokerNone})
		// No consumer subscribes: the server drops each message, which the relay is told to accept.
		runDaemonRecovery(t, bin, w, ms.URL()+"?allow_no_subscribers=true", killed("mosquitto", ms), outages)
	})
	t.Run("postgres", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cluster := ownCluster(ctx, t)
		w := newWorld(t, "daemonrecpg", worldOptions{db: cluster.URL("chaos")})
		runDaemonRecovery(t, bin, w, w.nats.URL(), daemonOutage{
			fault: "PostgreSQL stopped with pg_ctl -m immediate",
			bound: maxResume,
			stop: func() {
				if err := cluster.Stop(context.Background(), PGImmediate); err != nil {
					t.Fatal(err)
				}
			},
			start: cluster.Start,
			accepting: func(ctx context.Context) bool {
				conn, err := pgx.Connect(ctx, cluster.URL("chaos"))
				if err != nil {
					return false
				}
				_ = conn.Close(ctx)
				return true
			},
		}, outages)
	})
}

// runDaemonRecovery runs the daemons, measures the drain of a backlog with no outage, then for each outage:
// enqueues a backlog that falls due during it, stops the server, starts it again, and measures from the moment
// the server first accepts connections.
func runDaemonRecovery(t *testing.T, bin string, w *world, brokerURL string, o daemonOutage, outages []time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline())
	defer cancel()
	backlog := size(5000, 20000)
	rc := w.relayConfig()
	daemons := make([]*daemonProc, size(2, 3))
	for i := range daemons {
		daemons[i] = startDaemon(t, bin, w.logs, "relay", "--db", rc.DB, "--table", rc.outbox(), "--inbox-table", rc.inbox(),
			"--broker", brokerURL, "--log-format", "json", "--log-level", "debug")
	}
	for i, d := range daemons {
		if err := d.await(ctx, "relay started"); err != nil {
			t.Fatalf("daemon %d: %v", i, err)
		}
	}

	due := time.Now().Add(2 * time.Second)
	w.backlog(ctx, backlog, due)
	baseline := w.drained(ctx, due)
	fmt.Printf("%s: %d postbox relay daemons; a backlog of %d messages due at once drains in %v with no outage\n",
		t.Name(), len(daemons), backlog, baseline.Round(time.Millisecond))

	var resumes []time.Duration
	for _, down := range outages {
		// Due a second after it is written, about as long after the server stops, and at least a second before it
		// starts again: the daemons find the backlog and the outage (polling every 500 ms) before the server is
		// back, so the time to their first publish is the recovery's, not the time to find the backlog.
		w.backlog(ctx, backlog, time.Now().Add(time.Second))
		o.stop()
		wait(ctx, down)
		up := make(chan time.Time, 1)
		go func() { up <- firstAccepted(ctx, o.accepting) }()
		if err := o.start(ctx); err != nil {
			t.Fatal(err)
		}
		tUp := <-up
		drain := w.drained(ctx, tUp)
		var gaps []time.Duration
		for i, d := range daemons {
			gap, ok := d.firstPublishAfter(tUp)
			if !ok {
				t.Errorf("outage of %v: daemon %d never published after the server came back", down, i)
				continue
			}
			gaps = append(gaps, gap)
		}
		resumes = append(resumes, gaps...)
		fmt.Printf("%s: %s, down %v: accepting again -> first publish per daemon %v; backlog of %d drained %v after (no outage: %v)\n",
			t.Name(), o.fault, down, roundAll(gaps), backlog, drain.Round(time.Millisecond), baseline.Round(time.Millisecond))
		if drain > 2*baseline {
			t.Errorf("outage of %v: the backlog drained %v after the server came back, over twice the %v it takes with no outage",
				down, drain, baseline)
		}
	}
	for i, d := range daemons {
		if err := d.stop(ctx); err != nil {
			t.Errorf("daemon %d: %v", i, err)
		}
	}
	if len(resumes) == 0 {
		return
	}
	p99 := percentile(resumes, 0.99)
	fmt.Printf("%s: resume after %s: p99 %v, max %v over %d daemon restarts of the server\n", t.Name(), o.fault,
		p99.Round(time.Millisecond), percentile(resumes, 1).Round(time.Millisecond), len(resumes))
	if p99 > o.bound {
		t.Errorf("p99 time from the server accepting connections to a daemon's first publish is %v, want at most %v", p99, o.bound)
	}
}

// daemonProc is a running `postbox relay` whose JSON log the scenario reads as it is written: when each batch
// with a published message was logged, and how many times each message was logged. Other output goes to the
// scenario's logs.
type daemonProc struct {
	cmd  *exec.Cmd
	exit chan struct{} // closed when the process has exited and its log was read

	mu        sync.Mutex
	published []time.Time                 // when each batch that published something was logged
	msgs      map[string]int              // log lines by message
	records   map[string][]map[string]any // the lines other than batches, by message
	changed   chan struct{}               // closed and replaced when msgs changes
}

// startDaemon starts bin with args, dying with the suite, and reads its log.
func startDaemon(t *testing.T, bin string, logs io.Writer, args ...string) *daemonProc {
	t.Helper()
	d := &daemonProc{cmd: exec.Command(bin, args...), exit: make(chan struct{}), msgs: map[string]int{},
		records: map[string][]map[string]any{}, changed: make(chan struct{})}
	d.cmd.Env = os.Environ()
	d.cmd.Stdout = logs
	stderr, err := d.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	dieWithParent(d.cmd)
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		d.read(stderr, logs)
		_ = d.cmd.Wait()
		close(d.exit)
	}()
	t.Cleanup(func() {
		_ = d.cmd.Process.Kill()
		<-d.exit
	})
	return d
}

// read reads the daemon's log until it closes.
func (d *daemonProc) read(r io.Reader, logs io.Writer) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		at := time.Now()
		var line struct {
			Msg       string `json:"msg"`
			Published int    `json:"published"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil || line.Msg == "" {
			fmt.Fprintf(logs, "%s\n", sc.Bytes())
			continue
		}
		var record map[string]any
		if line.Msg != "batch" {
			fmt.Fprintf(logs, "%s\n", sc.Bytes())
			_ = json.Unmarshal(sc.Bytes(), &record)
		}
		d.mu.Lock()
		if record != nil {
			d.records[line.Msg] = append(d.records[line.Msg], record)
		}
		if line.Msg == "batch" && line.Published > 0 {
			d.published = append(d.published, at)
		}
		d.msgs[line.Msg]++
		close(d.changed)
		d.changed = make(chan struct{})
		d.mu.Unlock()
	}
}

// await waits until the daemon logged a line whose message starts with prefix.
func (d *daemonProc) await(ctx context.Context, prefix string) error {
	for {
		d.mu.Lock()
		n, changed := d.countLocked(prefix), d.changed
		d.mu.Unlock()
		if n > 0 {
			return nil
		}
		select {
		case <-changed:
		case <-d.exit:
			return fmt.Errorf("postbox relay exited before logging %q (see the log)", prefix)
		case <-ctx.Done():
			return fmt.Errorf("postbox relay did not log %q: %w", prefix, ctx.Err())
		}
	}
}

// count returns how many lines the daemon logged whose message starts with prefix.
func (d *daemonProc) count(prefix string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.countLocked(prefix)
}

func (d *daemonProc) countLocked(prefix string) int {
	n := 0
	for msg, c := range d.msgs {
		if strings.HasPrefix(msg, prefix) {
			n += c
		}
	}
	return n
}

// lines returns the lines the daemon logged with message msg, each as its JSON object.
func (d *daemonProc) lines(msg string) []map[string]any {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.records[msg]
}

// firstPublish returns when the daemon first logged a batch that published something.
func (d *daemonProc) firstPublish() (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.published) == 0 {
		return time.Time{}, false
	}
	return d.published[0], true
}

// firstPublishAfter returns how long after t the daemon first logged a batch that published something.
func (d *daemonProc) firstPublishAfter(t time.Time) (time.Duration, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, at := range d.published {
		if at.After(t) {
			return at.Sub(t), true
		}
	}
	return 0, false
}

// stop stops the daemon with SIGINT and waits until it has exited.
func (d *daemonProc) stop(ctx context.Context) error {
	_ = d.cmd.Process.Signal(os.Interrupt)
	select {
	case <-d.exit:
		if code := d.cmd.ProcessState.ExitCode(); code != 0 {
			return fmt.Errorf("postbox relay exited %d on SIGINT (see the log)", code)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("postbox relay did not exit on SIGINT: %w", ctx.Err())
	}
}

// TestDaemonStartsWhileDatabaseDown: a `postbox relay` started while its PostgreSQL is stopped waits for it
// (saying so once) instead of exiting, and publishes the messages committed before within a second of the
// database accepting connections again, after a clean stop and after a crash (pg_ctl -m immediate: the server
// answers "not yet accepting connections" while it recovers).
func TestDaemonStartsWhileDatabaseDown(t *testing.T) {
	bin := buildDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), deadline())
	defer cancel()
	cluster := ownCluster(ctx, t)
	w := newWorld(t, "daemondbdown", worldOptions{db: cluster.URL("chaos")})
	rc := w.relayConfig()
	accepting := func(ctx context.Context) bool {
		conn, err := pgx.Connect(ctx, cluster.URL("chaos"))
		if err != nil {
			return false
		}
		_ = conn.Close(ctx)
		return true
	}
	for _, mode := range []string{PGFast, PGImmediate} {
		if err := w.commit(ctx, w.events(500, 0, 0, 1)...); err != nil {
			t.Fatal(err)
		}
		if err := cluster.Stop(ctx, mode); err != nil {
			t.Fatal(err)
		}
		d := startDaemon(t, bin, w.logs, "relay", "--db", rc.DB, "--table", rc.outbox(), "--inbox-table", rc.inbox(),
			"--broker", w.nats.URL(), "--log-format", "json", "--log-level", "debug")
		if err := d.await(ctx, "database unreachable at start"); err != nil {
			t.Fatalf("after pg_ctl -m %s: %v", mode, err)
		}
		wait(ctx, time.Second) // the daemon keeps waiting
		up := make(chan time.Time, 1)
		go func() { up <- firstAccepted(ctx, accepting) }()
		if err := cluster.Start(ctx); err != nil {
			t.Fatal(err)
		}
		tUp := <-up
		if err := d.await(ctx, "relay started"); err != nil {
			t.Fatalf("after pg_ctl -m %s: %v", mode, err)
		}
		drain := w.drained(ctx, tUp)
		// The daemon may connect before the test's own poll sees the server accepting: then its first publish
		// comes before tUp, and counts as 0.
		at, ok := d.firstPublish()
		first := max(at.Sub(tUp), 0)
		fmt.Printf("%s: started while PostgreSQL was stopped (-m %s): accepting again -> first publish %v, 500 messages drained %v after\n",
			t.Name(), mode, first.Round(time.Millisecond), drain.Round(time.Millisecond))
		if !ok || first > time.Second {
			t.Errorf("after pg_ctl -m %s: first publish %v (published: %v) after PostgreSQL accepted connections; want within 1s", mode, first, ok)
		}
		if n := d.count("database unreachable at start"); n != 1 {
			t.Errorf("after pg_ctl -m %s: the daemon logged that it waits %d times; want once", mode, n)
		}
		if err := d.stop(ctx); err != nil {
			t.Error(err)
		}
	}
}
