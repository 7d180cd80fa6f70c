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

// JSONHandler returns a Handler for a command handler with an outbox: it decodes the payload into a C with
// DecodeJSON, calls h with the command and the delivered message m (for its ID, type and headers), and encodes
// the events h returns, which Process then enqueues in the same transaction as h's writes. Fields of the payload
// that C does not have are ignored, so a producer that adds an optional field breaks no consumer; use
// JSONHandlerStrict to refuse them. A payload that does not decode is an error marked Permanent, because no
// redelivery can fix it: with a failure policy (ConsumerConfig.MaxFailures) the message is recorded as failed at
// once, and without one it is Rejected.
func JSONHandler[TTx, C any](h func(ctx context.Context, tx TTx, cmd C, m Message) ([]Event, error)) Handler[TTx] {
	return jsonHandler(DecodeJSON[C], h)
}

// JSONHandlerStrict is JSONHandler decoding with DecodeJSONStrict: a payload with a field C does not have is
// refused as permanent, for consumers that would rather stop than ignore data they do not understand.
func JSONHandlerStrict[TTx, C any](h func(ctx context.Context, tx TTx, cmd C, m Message) ([]Event, error)) Handler[TTx] {
	return jsonHandler(DecodeJSONStrict[C], h)
}

func jsonHandler[TTx, C any](decode func([]byte) (C, error), h func(ctx context.Context, tx TTx, cmd C, m Message) ([]Event, error)) Handler[TTx] {
	return func(ctx context.Context, tx TTx, m Message) ([]Message, error) {
		cmd, err := decode(m.Payload)
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

// DecodeJSON decodes payload into a T. Fields T does not have are ignored, so that a producer adding an optional
// field does not break its consumers; a second JSON value after the first, or an empty payload, is an error, so
// that a producer's mistake is caught rather than half-read. DecodeJSONStrict also refuses unknown fields.
func DecodeJSON[T any](payload []byte) (T, error) { return decodeJSON[T](payload, false) }

// DecodeJSONStrict decodes payload into a T as DecodeJSON does, and also refuses a field T does not have.
func DecodeJSONStrict[T any](payload []byte) (T, error) { return decodeJSON[T](payload, true) }

func decodeJSON[T any](payload []byte, strict bool) (T, error) {
	var v T
	dec := json.NewDecoder(bytes.NewReader(payload))
	if strict {
		dec.DisallowUnknownFields()
	}
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
