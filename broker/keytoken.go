package broker

import "strings"

// KeyToken returns key as one word of a dot-separated destination name (a NATS subject token, an AMQP routing-key
// word): letters, digits, '-' and '_' stay, every other byte becomes %XX (upper-case hex), and the empty key
// becomes "%". Distinct keys give distinct words, readable keys stay readable ("order-42" → "order-42",
// "a.b" → "a%2Eb"), and no key can produce the '.' that separates words or a wildcard ('*', '>', '#').
func KeyToken(key string) string {
	if key == "" {
		return "%"
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(key))
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			b.WriteByte(c)
		} else {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}
