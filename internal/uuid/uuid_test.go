package uuid

import "testing"

// TestRoundTrip: a stored ID (bytes, as MySQL keeps it) reads back as the text the core generated and parsed.
func TestRoundTrip(t *testing.T) {
	const text = "0190f6e4-3b7a-7c3d-8e4f-123456789abc"
	u, err := Parse("0190F6E4-3B7A-7C3D-8E4F-123456789ABC")
	if err != nil {
		t.Fatal(err)
	}
	if u[0] != 0x01 || u[15] != 0xbc {
		t.Fatalf("Parse = %x", u)
	}
	if got := Format(u); got != text {
		t.Fatalf("Format = %q, want %q", got, text)
	}
}
