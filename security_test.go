package postbox

import (
	"context"
	"errors"
	"testing"
)

// TestDeadFilterRefusesWhatEnqueueRefuses: a dead-letter topic filter with invalid UTF-8, a control character or
// a bidirectional override is refused before the store sees it (the store here has no dead-letter methods, so
// reaching it would panic).
func TestDeadFilterRefusesWhatEnqueueRefuses(t *testing.T) {
	inserted := 0
	c, err := NewClient[struct{}](validationOnly{inserted: &inserted}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, topic := range []string{"nomatch\xbf' OR 1=1 -- ", "orders\x00", "orders\x1b[2J", "orders\u009b2J", "\u202eorders",
		"orders\u2066", string(make([]byte, MaxTopicLen+1))} {
		f := DeadFilter{Topic: topic}
		if _, err := c.ListDead(ctx, f); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("ListDead(topic %q) = %v; want ErrInvalidConfig", topic, err)
		}
		if _, err := c.RetryDead(ctx, f); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("RetryDead(topic %q) = %v; want ErrInvalidConfig", topic, err)
		}
		if _, err := c.PurgeDead(ctx, f); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("PurgeDead(topic %q) = %v; want ErrInvalidConfig", topic, err)
		}
	}
}

// TestEnqueueRefusesC1AndBidiControls: C1 controls (U+009B is an 8-bit CSI to some terminals) and bidirectional
// overrides or isolates are refused in topics, types, keys and header values.
func TestEnqueueRefusesC1AndBidiControls(t *testing.T) {
	inserted := 0
	c, err := NewClient[struct{}](validationOnly{inserted: &inserted}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ok := Message{Topic: "orders", Type: "order.created", Key: "o-1", Headers: map[string]string{"tenant": "acme"}}
	for _, bad := range []string{"\u0085", "x\u009b31m", "\u202eevil", "a\u202ab", "\u2066x\u2069", "\u2068"} {
		for field, m := range map[string]Message{
			"topic":  {Topic: bad, Type: ok.Type, Key: ok.Key},
			"type":   {Topic: ok.Topic, Type: bad, Key: ok.Key},
			"key":    {Topic: ok.Topic, Type: ok.Type, Key: bad},
			"header": {Topic: ok.Topic, Type: ok.Type, Headers: map[string]string{"tenant": bad}},
		} {
			if _, err := c.Enqueue(context.Background(), struct{}{}, m); !errors.Is(err, ErrInvalidMessage) {
				t.Errorf("%s %q: Enqueue = %v; want ErrInvalidMessage", field, bad, err)
			}
		}
	}
	if inserted != 0 {
		t.Fatalf("%d refused messages written", inserted)
	}
	// Right-to-left text itself is fine.
	if _, err := c.Enqueue(context.Background(), struct{}{}, Message{Topic: "orders", Type: "x", Key: "עברית"}); err != nil {
		t.Fatalf("a Hebrew key was refused: %v", err)
	}
}
