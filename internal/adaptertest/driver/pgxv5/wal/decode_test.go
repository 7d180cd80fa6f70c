package wal_test

import (
	"context"
	"encoding/binary"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver"
	"github.com/postbox-go/postbox/driver/pgxv5/wal"
)

// A header count is checked against the limit before anything is allocated for it: an 8 MiB message claiming
// millions of headers must be refused at the cost of reading it, not of a map sized by the count (M4).
func TestDecodeCapsHeaderCountBeforeAllocating(t *testing.T) {
	b, err := wal.Encode(driver.Record{Message: driver.Message{ID: postbox.NewID(), Topic: "t", Type: "x"}, CreatedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	b = b[:len(b)-1] // the header count 0
	const size = 8 << 20
	b = binary.AppendUvarint(b, size/2)
	b = append(b, make([]byte, size)...) // empty names and values: the smallest headers there are
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err = wal.Decode(b)
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatalf("a message with %d headers decoded; the limit is %d", size/2, postbox.MaxHeaders)
	}
	if !strings.Contains(err.Error(), "headers") {
		t.Errorf("error %q does not say the header count is over the limit", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Errorf("decoding an %d-byte message allocated %d bytes before refusing it; want under 1 MiB", len(b), alloc)
	}
}

// Decode refuses what Enqueue refuses: a record that no client could have enqueued is not a postbox message,
// whoever wrote it into the WAL (M4). A NUL in a text field, in particular, could never be parked.
func TestDecodeRefusesWhatEnqueueRefuses(t *testing.T) {
	ok := driver.Message{ID: postbox.NewID(), Topic: "orders", Type: "order.created", Key: "k", Headers: map[string]string{"tenant": "acme"}}
	for name, edit := range map[string]func(m *driver.Message){
		"NUL in the topic":           func(m *driver.Message) { m.Topic = "ord\x00ers" },
		"empty topic":                func(m *driver.Message) { m.Topic = "" },
		"empty type":                 func(m *driver.Message) { m.Type = "" },
		"control character in a key": func(m *driver.Message) { m.Key = "k\x1b[2J" },
		"invalid UTF-8 in the type":  func(m *driver.Message) { m.Type = "order.\xff" },
		"bidi override in a header":  func(m *driver.Message) { m.Headers = map[string]string{"tenant": "a\u202eb"} },
		"header name with a space":   func(m *driver.Message) { m.Headers = map[string]string{"bad name": "v"} },
		"CloudEvents header":         func(m *driver.Message) { m.Headers = map[string]string{"ce-id": "v"} },
		"topic over MaxTopicLen":     func(m *driver.Message) { m.Topic = strings.Repeat("t", postbox.MaxTopicLen+1) },
		"key over MaxKeyLen":         func(m *driver.Message) { m.Key = strings.Repeat("k", postbox.MaxKeyLen+1) },
		"header value over the limit": func(m *driver.Message) {
			m.Headers = map[string]string{"h": strings.Repeat("v", postbox.MaxHeaderLen+1)}
		},
	} {
		m := ok
		edit(&m)
		b, err := wal.Encode(driver.Record{Message: m, CreatedAt: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := wal.Decode(b); !errors.Is(err, postbox.ErrInvalidMessage) {
			t.Errorf("%s: Decode returned %v, want an error wrapping postbox.ErrInvalidMessage", name, err)
		}
	}
	b, err := wal.Encode(driver.Record{Message: ok, CreatedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wal.Decode(b); err != nil {
		t.Errorf("a valid message: %v", err)
	}
}

// A secret shorter than MinSecretBytes is refused by the driver and by the relay, saying how long it must be.
func TestShortSecretRefused(t *testing.T) {
	short := []byte("0123456789")
	if _, err := wal.NewWithConfig(nil, &wal.Config{Secret: short}); !errors.Is(err, postbox.ErrInvalidConfig) || !strings.Contains(err.Error(), "at least 32") {
		t.Errorf("NewWithConfig with a 10-byte secret: %v, want ErrInvalidConfig asking for 32 bytes", err)
	}
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	client, err := postbox.NewClient(wal.New(pool), nil)
	if err != nil {
		t.Fatal(err)
	}
	pub := postbox.PublisherFunc(func(context.Context, []postbox.Record) error { return nil })
	if _, err := wal.NewRelay(pool, client, pub, &wal.RelayConfig{Secret: short}); !errors.Is(err, postbox.ErrInvalidConfig) || !strings.Contains(err.Error(), "RelayConfig.Secret") {
		t.Errorf("NewRelay with a 10-byte secret: %v, want ErrInvalidConfig naming RelayConfig.Secret", err)
	}
}
