package chaos

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver"
	"github.com/postbox-go/postbox/driver/pgxv5/wal"
)

// TestPartialWAL: the WAL relay with one of two destinations down for 60 s, and one message that cannot be
// parked as it is (a NUL byte in a header value, which the table's jsonb column refuses) and that its destination
// refuses (an invalid HTTP header), so that it is retried. The healthy topic keeps its latency; the confirmed position keeps moving during the outage, so the WAL
// the slot retains stays bounded (the down destination's messages are spilled into the table after SpillAfter,
// where the table relay beside it publishes them once the destination is back); nothing is lost.
func TestPartialWAL(t *testing.T) {
	t.Parallel() // each compares its own phases: run beside the other partial scenarios to keep the suite short
	ctx, cancel := context.WithTimeout(context.Background(), deadline())
	defer cancel()
	cluster := ownCluster(ctx, t, walSettings...)
	p := newPartialOn(ctx, t, "wal", false, cluster.URL("chaos"), func(pool *pgxpool.Pool) driver.Driver[pgx.Tx] {
		d, err := wal.NewWithConfig(pool, &wal.Config{Secret: walSecret})
		if err != nil {
			t.Fatal(err)
		}
		return d
	})
	slot := wal.SlotName(driver.Names{Outbox: p.client.Config().Table})
	if err := wal.CreateSlot(ctx, p.pool, slot); err != nil {
		t.Fatal(err)
	}
	rtr := p.router()
	walRelay, err := wal.NewRelay(p.pool, p.client, rtr, &wal.RelayConfig{Secret: walSecret})
	if err != nil {
		t.Fatal(err)
	}
	tableRelay, err := postbox.NewRelay(p.client, rtr, nil)
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, run := range []func(context.Context) error{walRelay.Run, tableRelay.Run} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := run(rctx); err != nil {
				t.Error(err)
			}
		}()
	}
	defer func() { stop(); wg.Wait() }()

	lsn := func(q string, args ...any) (out string) {
		t.Helper()
		if err := p.pool.QueryRow(ctx, q, args...).Scan(&out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	retained := func() (n int64) {
		t.Helper()
		if err := p.pool.QueryRow(ctx, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint FROM pg_replication_slots WHERE slot_name = $1",
			slot).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	p.produce(ctx)
	wait(ctx, size(4*time.Second, 20*time.Second))

	// The message no table column takes as it is: written the way the wal driver writes, with a NUL in a
	// header value, on a topic of the healthy destination, which refuses it for good (an invalid header).
	poison := driver.Record{Message: driver.Message{ID: postbox.NewID(), Topic: p.healthyTopic, Type: "partial", Key: "poison",
		Headers: map[string]string{"note": "nul\x00here"}, Payload: []byte(`{}`)}, CreatedAt: time.Now()}
	prefix := wal.Prefix(driver.Names{Outbox: p.client.Config().Table})
	content, err := wal.Encode(poison)
	if err != nil {
		t.Fatal(err)
	}
	poisonLSN := lsn("SELECT pg_logical_emit_message(true, $1, $2::bytea)::text", prefix, signWAL(walSecret, prefix, content))

	p.phase.Store(1)
	p.faulty.down()
	downAt := time.Now()
	var midLSN string
	var maxRetained int64
	for time.Since(downAt) < 60*time.Second && ctx.Err() == nil {
		wait(ctx, time.Second)
		maxRetained = max(maxRetained, retained())
		if midLSN == "" && time.Since(downAt) >= 30*time.Second {
			midLSN = lsn("SELECT pg_current_wal_lsn()::text")
		}
	}
	endRetained := retained()
	confirmed := lsn("SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", slot)
	st := walRelay.Stats()
	p.faulty.up(t)
	backAt := time.Now()
	p.phase.Store(2)
	wait(ctx, time.Second)
	p.stop()
	p.awaitAll(ctx, nil)
	last := firstAfter(p.faulty, backAt)
	fmt.Printf("%s: a destination down %v: WAL retained at most %d bytes (%d at the end), %d messages spilled into the table; first message after its return %v later\n",
		t.Name(), backAt.Sub(downAt).Round(time.Second), maxRetained, endRetained, st.Spilled, last.Sub(backAt).Round(time.Millisecond))
	p.compare("a destination down and an unparkable message (WAL relay)")

	var passed bool
	if err := p.pool.QueryRow(ctx, "SELECT $1::pg_lsn > $2::pg_lsn AND $1::pg_lsn > $3::pg_lsn", confirmed, midLSN, poisonLSN).Scan(&passed); err != nil {
		t.Fatal(err)
	}
	if !passed {
		t.Errorf("the slot's confirmed position %s at the end of the outage is not past the position 30 s into it (%s) and the unparkable message (%s): the slot is pinned",
			confirmed, midLSN, poisonLSN)
	}
	if st.Spilled == 0 {
		t.Errorf("no message for the down destination was spilled into the table (Stats %+v)", st)
	}
	// The message the table refuses as it is was spilled (or parked) with its NUL replaced, and then published by
	// the table relay; or, refused at decoding, counted and logged. Either way it never pinned the slot.
	if _, ok := p.healthy.received(poison.ID); !ok && st.Errors == 0 {
		var headers string
		err := p.pool.QueryRow(ctx, "SELECT headers::text FROM "+p.client.Config().Table+" WHERE id = $1", poison.ID).Scan(&headers)
		if err != nil || !strings.Contains(headers, "\uFFFD") {
			t.Errorf("the unparkable message was not published, not refused, and is in the table with headers %q (%v): want it stored with the NUL replaced",
				headers, err)
		}
	}
}

// signWAL signs content (wal.Encode's, version 1) as a wal client with secret does (wal.SignedVersion): the
// version byte, HMAC-SHA256 over the prefix, a zero byte, the version byte and the fields, then the fields.
func signWAL(secret []byte, prefix string, content []byte) []byte {
	fields := content[1:]
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(prefix))
	m.Write([]byte{0, wal.SignedVersion})
	m.Write(fields)
	return append(append([]byte{wal.SignedVersion}, m.Sum(nil)...), fields...)
}
