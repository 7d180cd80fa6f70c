package brokertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
)

// Records returns n records on topic as the relay would hand them to a publisher: UUIDv7 IDs, keys cycling
// through keys (none when keys is 0), types, JSON, binary and empty payloads, and headers including trace
// context, a content type and a mixed-case name.
func Records(topic string, n, keys int) []postbox.Record {
	now := time.Now().UTC()
	out := make([]postbox.Record, n)
	for i := range out {
		m := postbox.Message{
			ID:      postbox.NewID(),
			Topic:   topic,
			Type:    fmt.Sprintf("test.event.v%d", i%3),
			Payload: []byte(fmt.Sprintf(`{"n":%d,"text":"grüße"}`, i)),
			Headers: map[string]string{
				"traceparent":  fmt.Sprintf("00-4bf92f3577b34da6a3ce929d0e0e%04x-00f067aa0ba902b7-01", i%0x10000),
				"tracestate":   "congo=t61rcWkgMzE",
				"content-type": "application/json",
				"X-Tenant":     "acme",
				"n":            fmt.Sprint(i),
			},
		}
		if keys > 0 {
			m.Key = fmt.Sprintf("key-%d", i%keys)
			if i%keys == 1 {
				m.Key = "clé-ü-1" // keys in any script reach the consumer unchanged
			}
		}
		switch i % 10 {
		case 3:
			m.Payload = []byte{0, 0xff, 0xfe, '\n', 0x80}
			m.Headers["content-type"] = "application/octet-stream"
		case 7:
			m.Payload = nil
			delete(m.Headers, "content-type")
		}
		out[i] = postbox.Record{Message: m, Status: postbox.StatusPending,
			CreatedAt: now.Add(time.Duration(i) * time.Microsecond)}
	}
	return out
}

// publish publishes recs in batches of size, failing the test on any error. With NoBacklog, records that
// failed are published again until Timeout, as a relay would: the subscriber may not be listening yet.
func (s *suite) publish(t *testing.T, pub postbox.Publisher, recs []postbox.Record, size int) {
	t.Helper()
	if err := s.tryPublish(context.Background(), pub, recs, size); err != nil {
		t.Fatal(err)
	}
}

// tryPublish is publish returning the error, and giving up when ctx ends.
func (s *suite) tryPublish(ctx context.Context, pub postbox.Publisher, recs []postbox.Record, size int) error {
	deadline := time.Now().Add(s.f.Timeout)
	for len(recs) > 0 {
		batch := recs[:min(size, len(recs))]
		recs = recs[len(batch):]
		for {
			pctx, cancel := context.WithTimeout(ctx, s.f.Timeout)
			err := pub.Publish(pctx, batch)
			cancel()
			if err == nil {
				break
			}
			if !s.f.NoBacklog || time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("publish of %d messages: %w", len(batch), err)
			}
			var be *postbox.BatchError
			if errors.As(err, &be) && len(be.Errs) == len(batch) {
				var failed []postbox.Record
				for i, e := range be.Errs {
					if e != nil {
						failed = append(failed, batch[i])
					}
				}
				batch = failed
			}
			select {
			case <-time.After(10 * time.Millisecond):
			case <-ctx.Done():
			}
		}
	}
	return nil
}

// checkDelivered fails the test unless every delivery carries the message published with its ID.
func (s *suite) checkDelivered(t *testing.T, recs []postbox.Record, got []received) {
	t.Helper()
	byID := make(map[string]postbox.Record, len(recs))
	for _, r := range recs {
		byID[r.ID] = r
	}
	for _, g := range got {
		want, ok := byID[g.msg.ID]
		if !ok {
			t.Errorf("delivered message %s (type %q, topic %q) was never published in this test", g.msg.ID, g.msg.Type, g.msg.Topic)
			continue
		}
		if diff := s.diff(want, g); diff != "" {
			t.Errorf("message %s arrived changed: %s", want.ID, diff)
		}
	}
}

func (s *suite) diff(want postbox.Record, g received) string {
	var d []string
	if g.msg.Topic != want.Topic {
		d = append(d, fmt.Sprintf("topic %q, want %q", g.msg.Topic, want.Topic))
	}
	if g.msg.Key != want.Key {
		d = append(d, fmt.Sprintf("key %q, want %q", g.msg.Key, want.Key))
	}
	if g.msg.Type != want.Type {
		d = append(d, fmt.Sprintf("type %q, want %q", g.msg.Type, want.Type))
	}
	if !bytes.Equal(g.msg.Payload, want.Payload) {
		d = append(d, fmt.Sprintf("payload %q, want %q", g.msg.Payload, want.Payload))
	}
	wantH := make(map[string]string, len(want.Headers))
	for k, v := range want.Headers {
		wantH[s.headerName(k)] = v
	}
	gotH := make(map[string]string, len(g.msg.Headers))
	for k, v := range g.msg.Headers {
		gotH[s.headerName(k)] = v
	}
	if !maps.Equal(gotH, wantH) {
		d = append(d, fmt.Sprintf("headers %v, want %v", gotH, wantH))
	}
	if !g.time.Equal(want.CreatedAt) {
		d = append(d, fmt.Sprintf("time %v, want the enqueue time %v", g.time, want.CreatedAt))
	}
	return strings.Join(d, "; ")
}

// checkRetryable fails the test unless err is a non-nil error the relay would retry.
func checkRetryable(t *testing.T, what string, err error, n int) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: Publish returned nil", what)
	}
	var be *postbox.BatchError
	if errors.As(err, &be) {
		if len(be.Errs) != n {
			t.Fatalf("%s: BatchError has %d entries for %d records", what, len(be.Errs), n)
		}
		for i, e := range be.Errs {
			if e == nil {
				t.Fatalf("%s: record %d reported published: %v", what, i, err)
			}
		}
	}
	if postbox.IsPermanent(err) {
		t.Fatalf("%s: error marked permanent, so the relay would park the messages as dead instead of retrying: %v", what, err)
	}
}
