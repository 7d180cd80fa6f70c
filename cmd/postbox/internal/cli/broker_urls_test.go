package cli

import (
	"slices"
	"strings"
	"testing"
)

// TestKafkaURL: a host list takes hosts with and without ports, the user and password are decoded, and the
// password never shows when the URL is printed.
func TestKafkaURL(t *testing.T) {
	raw := "kafka://relay:p%40ss@k1,k2:9093,[::1]/?sasl=scram-sha-512"
	seeds, u, err := parseKafkaURL(raw)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"k1:9092", "k2:9093", "[::1]:9092"}; !slices.Equal(seeds, want) {
		t.Errorf("seeds %v; want %v", seeds, want)
	}
	if p, _ := u.User.Password(); u.User.Username() != "relay" || p != "p@ss" || u.Query().Get("sasl") != "scram-sha-512" {
		t.Errorf("user %v, query %v", u.User, u.Query())
	}
	if got := RedactURL(raw); strings.Contains(got, "p%40ss") || !strings.Contains(got, "relay:xxxxx@k1,k2:9093") {
		t.Errorf("RedactURL(%q) = %q", raw, got)
	}
	for _, bad := range []string{"kafka:", "kafka://", "kafka://k1/topic", "kafka://k1,,k2"} {
		if _, _, err := parseKafkaURL(bad); err == nil {
			t.Errorf("parseKafkaURL(%q) succeeded", bad)
		}
	}
}
