// Package uuid formats and parses UUIDs in their canonical text form, for the core and the stores alike, so that
// an ID reads the same whichever side wrote it.
package uuid

import (
	"encoding/hex"
	"fmt"
)

// Format returns u in canonical text form: 36 lower-case characters, xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx.
func Format(u [16]byte) string {
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
	return string(b[:])
}

// Parse accepts a UUID in canonical form, in any case, and returns its bytes.
func Parse(s string) ([16]byte, error) {
	var u [16]byte
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, fmt.Errorf("%q is not a UUID in the form xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", s)
	}
	j := 0
	for i := 0; i < 36; {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			i++ // a dash, checked above; a dash anywhere else is not a hex digit and is refused below
			continue
		}
		if _, err := hex.Decode(u[j:j+1], []byte(s[i:i+2])); err != nil {
			return u, fmt.Errorf("%q is not a UUID: %v", s, err)
		}
		i += 2
		j++
	}
	return u, nil
}
