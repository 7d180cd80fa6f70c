package webhook

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// SecretPrefix marks a secret in the Standard Webhooks form: "whsec_" followed by the key in standard base64.
const SecretPrefix = "whsec_"

// MinSecretBytes is the shortest key accepted, in bytes after decoding. It is the lower bound the Standard
// Webhooks specification gives (24 to 64 bytes): anyone holding one signed request can test guesses at the key
// offline, billions per second, so a short key falls to a search and with it every signature.
const MinSecretBytes = 24

// ErrInvalidSecret means a webhook secret cannot be used: empty, too short, or a malformed whsec_ value.
var ErrInvalidSecret = errors.New("webhook: invalid secret")

// ParseSecret returns the HMAC key a secret stands for.
//
// A secret that starts with "whsec_" is in the Standard Webhooks form, the one webhook providers issue and the
// reference libraries read: the rest is the key in standard base64, and the key is the decoded bytes. Any other
// secret is used as it is: its bytes are the key, which keeps secrets configured before whsec_ was understood
// working unchanged. The two forms name the same key when the text is the base64 of the other; to give a
// standard receiver a plain-text secret S, give it "whsec_" + base64(S) (see FormatSecret).
//
// The key must be at least MinSecretBytes long. Errors wrap ErrInvalidSecret and never quote the secret.
// Generate a new secret with, for example, `echo whsec_$(openssl rand -base64 32)`.
func ParseSecret(secret string) ([]byte, error) {
	if secret == "" {
		return nil, fmt.Errorf("%w: the secret is empty (an unset environment variable?)", ErrInvalidSecret)
	}
	key := []byte(secret)
	if b64, ok := strings.CutPrefix(secret, SecretPrefix); ok {
		var err error
		if key, err = base64.StdEncoding.DecodeString(b64); err != nil {
			var corrupt base64.CorruptInputError
			if errors.As(err, &corrupt) {
				return nil, fmt.Errorf("%w: the part after %s is not standard base64 (bad character or padding at position %d of %d)",
					ErrInvalidSecret, SecretPrefix, int64(corrupt), len(b64))
			}
			return nil, fmt.Errorf("%w: the part after %s is not standard base64", ErrInvalidSecret, SecretPrefix)
		}
		if len(key) < MinSecretBytes {
			return nil, fmt.Errorf("%w: the %s secret decodes to %d bytes; use at least %d random bytes (openssl rand -base64 32)",
				ErrInvalidSecret, SecretPrefix, len(key), MinSecretBytes)
		}
		return key, nil
	}
	if len(key) < MinSecretBytes {
		return nil, fmt.Errorf("%w: the secret is %d bytes long; use at least %d, such as whsec_ followed by the output of openssl rand -base64 32",
			ErrInvalidSecret, len(key), MinSecretBytes)
	}
	return key, nil
}

// FormatSecret returns key in the Standard Webhooks form, "whsec_" + base64(key), to give to a receiver built
// on a Standard Webhooks library. ParseSecret(FormatSecret(key)) returns key.
func FormatSecret(key []byte) string {
	return SecretPrefix + base64.StdEncoding.EncodeToString(key)
}
