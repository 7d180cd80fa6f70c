package postbox

import (
	"regexp"
	"strings"
	"testing"
)

func TestMatchTopic(t *testing.T) {
	for _, c := range []struct {
		pattern, topic string
		want           bool
	}{
		{"orders.*", "orders.created", true}, {"orders.*", "orders.eu.created", true}, {"orders.*", "orders", false},
		{"*", "anything", true}, {"orders", "orders", true}, {"orders", "orders2", false}, {"*.created", "orders.created", true},
		{"a*b*c", "a-x-b-y-c", true}, {"a*b*c", "a-x-c-y-b", false}, {"", "", true},
	} {
		if got := matchTopic(c.pattern, c.topic); got != c.want {
			t.Errorf("matchTopic(%q, %q) = %v", c.pattern, c.topic, got)
		}
	}
}

// FuzzMatchTopic: route patterns match exactly as the documented glob, where * is any run of characters.
func FuzzMatchTopic(f *testing.F) {
	for _, s := range [][2]string{{"orders.*", "orders.created"}, {"*", ""}, {"a*b*c", "aXbYbc"}, {"**", "x"}, {"a.b", "a.b.c"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, topic string) {
		if strings.ToValidUTF8(pattern, "\uFFFD") != pattern || strings.ToValidUTF8(topic, "\uFFFD") != topic {
			return // the regexp engine reads runes, matchTopic bytes; topics are valid UTF-8 (Enqueue checks)
		}
		parts := strings.Split(pattern, "*")
		for i, p := range parts {
			parts[i] = regexp.QuoteMeta(p)
		}
		want := regexp.MustCompile(`^(?s:` + strings.Join(parts, `.*`) + `)$`).MatchString(topic)
		if got := matchTopic(pattern, topic); got != want {
			t.Fatalf("matchTopic(%q, %q) = %v, want %v", pattern, topic, got, want)
		}
	})
}

func TestRouterSendsEachTopicToItsRoute(t *testing.T) {
	a, b, def := &testRoute{}, &testRoute{}, &testRoute{}
	r := &Router{Routes: []Route{{Topics: "a.*", Publisher: a}, {Topics: "b", Publisher: b, Name: "bee"}}, Default: def}
	if err := r.Publish(t.Context(), recordsOf("a.x", "b", "c", "a.y")); err != nil {
		t.Fatal(err)
	}
	if a.calls.Load() != 2 || b.calls.Load() != 1 || def.calls.Load() != 1 {
		t.Errorf("routes got %d, %d and %d messages, want 2, 1 and 1", a.calls.Load(), b.calls.Load(), def.calls.Load())
	}
	if got := strings.Join(r.DestinationNames(), ","); got != "a.*,bee,default" {
		t.Errorf("DestinationNames() = %s", got)
	}
	if r.Destination("a.z") != "a.*" || r.Destination("b") != "bee" || r.Destination("zz") != "default" {
		t.Error("Destination names the wrong route")
	}
	b.down.Store(true)
	noDefault := &Router{Routes: []Route{{Topics: "b", Publisher: b}}}
	err := noDefault.Publish(t.Context(), recordsOf("b", "c"))
	be, ok := err.(*BatchError)
	if !ok || !IsUnavailable(be.Errs[0]) || be.Errs[1] == nil || !strings.Contains(be.Errs[1].Error(), `no route matches topic "c"`) {
		t.Errorf("Publish = %v, want the route's outage for b and a no-route error naming c", err)
	}
}
