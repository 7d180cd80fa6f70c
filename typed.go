package postbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// Event is an event a command handler emits, with its data as a Go value. JSONHandler encodes Data as JSON into
// the payload and enqueues the event in the handler's transaction.
type Event struct {
	Topic   string
	Key     string
	Type    string
	Data    any
	Headers map[string]string
	// AvailableAt delays delivery; the zero value means at once.
	AvailableAt time.Time
}

// Message encodes e as a Message with a JSON payload.
func (e Event) Message() (Message, error) {
	payload, err := json.Marshal(e.Data)
	if err != nil {
		return Message{}, fmt.Errorf("postbox: encode event %q: %w", e.Type, err)
	}
	return Message{Topic: e.Topic, Key: e.Key, Type: e.Type, Payload: payload, Headers: e.Headers, AvailableAt: e.AvailableAt}, nil
}

// CommandHandler handles one decoded command inside tx and returns the events it caused. m is the delivered
// message, for its ID, type and headers.
type CommandHandler[TTx, C any] func(ctx context.Context, tx TTx, cmd C, m Message) ([]Event, error)

// JSONHandler returns a Handler that decodes the payload into a C with DecodeJSON, calls h, and encodes the events
// h returns, which Process then enqueues in the same transaction as h's writes: the command handler with an
// outbox. A payload that does not decode is an error marked Permanent, because no redelivery can fix it: with a
// failure policy (ConsumerConfig.MaxFailures) the message is recorded as failed at once.
func JSONHandler[TTx, C any](h CommandHandler[TTx, C]) Handler[TTx] {
	return func(ctx context.Context, tx TTx, m Message) ([]Message, error) {
		cmd, err := DecodeJSON[C](m.Payload)
		if err != nil {
			return nil, Permanent(fmt.Errorf("message %s (%s): %w", m.ID, m.Type, err))
		}
		events, err := h(ctx, tx, cmd, m)
		if err != nil {
			return nil, err
		}
		out := make([]Message, len(events))
		for i, e := range events {
			if out[i], err = e.Message(); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
}

// DecodeJSON decodes payload into a T strictly: a field T does not have, a second JSON value after the first, or
// an empty payload is an error, so that a producer's mistake is caught rather than half-read.
func DecodeJSON[T any](payload []byte) (T, error) {
	var v T
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		if errors.Is(err, io.EOF) {
			err = errors.New("payload is empty")
		}
		return v, fmt.Errorf("postbox: decode JSON into %T: %w", v, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return v, fmt.Errorf("postbox: decode JSON into %T: data after the first JSON value", v)
	}
	return v, nil
}
