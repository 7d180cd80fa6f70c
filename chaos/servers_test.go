package chaos

import (
	"context"
	"fmt"
	"net/url"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/postbox-go/postbox/internal/testenv/tcpproxy"
)

// TestBrokerRestartNATS: the scenario's own nats-server is stopped twice while relays publish and a consumer
// receives, once cleanly (SIGTERM) and once by a crash (SIGKILL), each time for four seconds (longer than the
// relay's PublishTimeout, so that publishes fail rather than wait in the client's reconnect buffer), and started
// again on the same port and store. Relays and consumers reconnect by themselves; what failed to publish is retried,
// what was delivered but not acked comes again and the inbox absorbs it.
func TestBrokerRestartNATS(t *testing.T) {
	events, over := size(3000, 20000), size(8*time.Second, 40*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), deadline())
	defer cancel()
	w := newWorld(t, "natsrestart", worldOptions{})
	w.goConsumer(w.consumerConfig())
	rc := w.relayConfig()
	rc.Workers = 2
	w.goRelay(rc)
	w.produce(ctx, events, over)

	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		wait(ctx, over/4)
		w.nats.Stop(sig)
		wait(ctx, 4*time.Second)
		if err := w.nats.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	w.settle(ctx)
	w.verdict(ctx, expect{events: events, dupBound: 0, bound: "no relay died: a publish is retried only when it was not acknowledged",
		fault: "nats-server stopped with SIGTERM and with SIGKILL, 4s each, and restarted", felt: publishFailed})
}

// TestPostgresRestart: a PostgreSQL cluster of the scenario's own (initdb, pg_ctl, its own port) holds the outbox,
// the inbox and the ledger, and is restarted twice while producers, relays and consumers run: once with a fast
// shutdown and once with an immediate one (a crash, recovered from the WAL), each time down for two seconds.
// Nothing is restarted by hand but the server: producers retry their transactions, relays their claims and
// consumers their deliveries.
func TestPostgresRestart(t *testing.T) {
	events, over := size(3000, 20000), size(8*time.Second, 40*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), deadline())
	defer cancel()
	cluster := ownCluster(ctx, t)
	w := newWorld(t, "pgrestart", worldOptions{db: cluster.URL("chaos")})
	w.goConsumer(w.consumerConfig())
	rc := w.relayConfig()
	rc.Workers = 2
	w.goRelay(rc)
	w.produce(ctx, events, over)

	modes := []string{PGFast, PGImmediate}
	for _, mode := range modes {
		wait(ctx, over/4)
		if err := cluster.Stop(ctx, mode); err != nil {
			t.Fatal(err)
		}
		wait(ctx, 2*time.Second)
		if err := cluster.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	w.settle(ctx)
	// A restart ends the claim transactions of batches being published: those batches are published again.
	bound := int64(len(modes) * rc.Workers * rc.BatchSize)
	w.verdict(ctx, expect{events: events, dupBound: bound,
		bound: fmt.Sprintf("one batch of %d per relay worker (%d) per restart (%d)", rc.BatchSize, rc.Workers, len(modes)),
		fault: "PostgreSQL restarted with pg_ctl -m fast and -m immediate, 2s down each", felt: claimFailed})
}

// TestBrokerRestartRabbitMQ: a RabbitMQ node of the scenario's own (its own node name, ports and directory) is
// stopped twice while relays publish, and started again on the same ports and directory each time; it is down for
// a second plus the few seconds it takes to boot, longer than the relay's PublishTimeout. The first stop is clean
// (SIGTERM) while the consumer receives; the second is a crash (SIGKILL) right after, while the relays publish
// what piled up in the outbox meanwhile and the queue holds it, the consumer having been stopped. Relays and consumers reconnect by themselves. The queue is durable
// and the messages persistent, so what RabbitMQ confirmed survives the crash; what was not confirmed is published
// again, and what was delivered but not acked comes again. RabbitMQ does not deduplicate, so a publish retried
// after a lost confirmation reaches the consumer twice, and the inbox absorbs it.
func TestBrokerRestartRabbitMQ(t *testing.T) {
	events, over := size(3000, 20000), size(16*time.Second, 40*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), deadline())
	defer cancel()
	logs := NewTail(60)
	rabbit, err := StartRabbitMQ(ctx, t.TempDir(), logs)
	if err != nil {
		t.Fatalf("%v\nits last log lines:\n%s", err, logs)
	}
	t.Cleanup(func() {
		rabbit.Close()
		if t.Failed() {
			t.Logf("RabbitMQ node %s's last log lines:\n%s", rabbit.Node(), logs)
		}
	})
	w := newWorld(t, "rabbitrestart", worldOptions{broker: brokerAMQP, amqpURL: rabbit.URL()})
	consumer := w.mustSpawn(w.consumerConfig())
	rc := w.relayConfig()
	rc.Workers = 2
	w.goRelay(rc)
	w.produce(ctx, events, over)

	restart := func(sig syscall.Signal) {
		rabbit.Stop(sig)
		wait(ctx, time.Second)
		if err := rabbit.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	wait(ctx, over/5)
	restart(syscall.SIGTERM)
	// The relays now publish what piled up in the outbox during the outage, and nobody consumes it.
	consumer.stop()
	wait(ctx, time.Second)
	backlog, err := w.amqpReady()
	if err != nil {
		t.Fatal(err)
	}
	restart(syscall.SIGKILL)
	w.mustSpawn(w.consumerConfig())

	w.settle(ctx)
	w.verdict(ctx, expect{events: events, dupBound: 0, bound: "no relay died: a publish is retried only when it was not confirmed",
		fault: fmt.Sprintf("RabbitMQ node stopped with SIGTERM, then killed with SIGKILL holding %d messages, restarted on the same ports and directory each time", backlog),
		felt:  publishFailed})
	if backlog == 0 {
		t.Errorf("the queue was empty when the node was killed: nothing shows that the node kept what it had confirmed")
	}
}

// TestBrokerOutageRabbitMQ: the network between the roles and the shared RabbitMQ fails, as a proxy in front of
// it, through which the relays and the consumer reach it, makes it fail. First the proxy cuts every connection and
// refuses new ones for four seconds; then it stalls all traffic for four seconds, as a hung server or a dead
// network path would, which no restart shows. The shared server itself is never stopped. RabbitMQ does not
// deduplicate, so a publish retried after a lost confirmation reaches the consumer twice, and the inbox absorbs it.
func TestBrokerOutageRabbitMQ(t *testing.T) {
	events, over := size(3000, 20000), size(10*time.Second, 40*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), deadline())
	defer cancel()
	w := newWorld(t, "rabbitoutage", worldOptions{broker: brokerAMQP})
	u, err := url.Parse(rabbitURL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := tcpproxy.Start(t, u.Host)
	via := *u
	via.Host = proxy.Addr()
	rc, cc := w.relayConfig(), w.consumerConfig()
	rc.URL, cc.URL, rc.Workers = via.String(), via.String(), 2
	w.goRelay(rc)
	w.goConsumer(cc)
	w.produce(ctx, events, over)

	wait(ctx, over/4)
	proxy.Refuse(true)
	proxy.Cut()
	wait(ctx, 4*time.Second)
	proxy.Refuse(false)

	wait(ctx, over/4)
	proxy.Stall()
	wait(ctx, 4*time.Second)
	proxy.Resume()

	w.settle(ctx)
	w.verdict(ctx, expect{events: events, dupBound: 0, bound: "no relay died: a publish is retried only when it was not confirmed",
		fault: "RabbitMQ unreachable through a proxy: connections cut and refused 4s, then all traffic stalled 4s", felt: publishFailed})
}

// ownCluster starts a PostgreSQL cluster of the scenario's own with a database "chaos", closed when the test ends
// and showing its log when the test failed.
func ownCluster(ctx context.Context, t *testing.T, settings ...string) *PGCluster {
	t.Helper()
	cluster, err := NewPGCluster(ctx, settings...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("temporary cluster's log:\n%s", cluster.Log())
		}
		if err := cluster.Close(); err != nil {
			t.Error(err)
		}
	})
	if err := createDB(ctx, cluster.URL("postgres"), "chaos"); err != nil {
		t.Fatal(err)
	}
	return cluster
}

func createDB(ctx context.Context, adminURL, name string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	return err
}

// publishFailed checks that relays saw publishes fail.
func publishFailed(s *roleStats) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.relay.Failed == 0 {
		return "no publish failed"
	}
	return ""
}

// claimFailed checks that relays saw claims or settles fail.
func claimFailed(s *roleStats) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.relay.Errors == 0 {
		return "no claim or settle failed"
	}
	return ""
}
