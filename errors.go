package postbox

import (
	"errors"

	"github.com/postbox-go/postbox/driver"
)

var (
	// ErrInvalidMessage is wrapped by every error about a message Enqueue refused. Nothing was written.
	ErrInvalidMessage = errors.New("postbox: invalid message")
	// ErrInvalidConfig is wrapped by every configuration error.
	ErrInvalidConfig = errors.New("postbox: invalid config")
	// ErrNotFound is returned by look-ups of one message that find none, such as FindMessage.
	ErrNotFound = errors.New("postbox: not found")
	// ErrLocked is returned by maintenance calls when another instance holds the lock for the same table.
	ErrLocked = driver.ErrLocked
)

// Permanent marks a publish error as permanent: the relay parks the message as dead at once instead of retrying.
// Publishers return it for errors that no retry can fix, such as a message the broker rejects as too large.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

// IsPermanent reports whether err, or an error it wraps, was marked with Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return "permanent: " + e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }
