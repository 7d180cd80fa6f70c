package postbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Contract checks a payload. JSON returns one that decodes into a Go type strictly; the jsonschema package
// compiles one from a JSON Schema. Check returns a short description of what is wrong, without the payload.
type Contract interface {
	Check(payload []byte) error
}

// ContractFunc adapts a function to Contract.
type ContractFunc func(payload []byte) error

// Check calls f.
func (f ContractFunc) Check(payload []byte) error { return f(payload) }

// Validator is implemented by payload types that have rules beyond their shape, such as a positive total. JSON
// calls Validate after decoding.
type Validator interface {
	Validate() error
}

// JSON returns a contract that decodes the payload into a T strictly: exactly one JSON value, no fields T does not
// have, every value of its field's type. When *T or T implements Validator, its Validate runs on the result.
func JSON[T any]() Contract {
	name := reflect.TypeFor[T]().String()
	return ContractFunc(func(payload []byte) error {
		dec := json.NewDecoder(bytes.NewReader(payload))
		dec.DisallowUnknownFields()
		var v T
		if err := dec.Decode(&v); err != nil {
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("payload is empty; it must be a JSON %s", name)
			}
			return fmt.Errorf("payload is not a valid %s: %v", name, err)
		}
		if _, err := dec.Token(); !errors.Is(err, io.EOF) {
			return fmt.Errorf("payload has data after the JSON %s; send exactly one value", name)
		}
		var check any = &v
		if val, ok := check.(Validator); ok {
			if err := val.Validate(); err != nil {
				return fmt.Errorf("payload is not a valid %s: %v", name, err)
			}
		}
		return nil
	})
}

// EventType describes one type of event in a Registry.
type EventType struct {
	// Type is the event type, such as "order.created". Required.
	Type string
	// Topic is the topic every event of this type must be enqueued on. Required.
	Topic string
	// KeyRequired refuses events of this type without a key, such as events that must stay in order per
	// aggregate.
	KeyRequired bool
	// Payload checks the payload: JSON[T]() for a Go type, or a compiled JSON Schema. Nil accepts any payload.
	Payload Contract
	// Description is for people reading the registry; Postbox does not use it.
	Description string
}

// Registry is the catalogue of the event types an application may enqueue: for each type its topic, whether it
// needs a key, and the contract its payload must meet. Set Config.Registry to have Enqueue refuse events that
// break it, and the relays of that client park such events as dead instead of publishing them.
//
// A registry refuses types it does not know. It is safe for concurrent use; types may be added while it is in use.
type Registry struct {
	mu    sync.RWMutex
	types map[string]EventType
}

// NewRegistry returns a registry holding the given types, or an error naming the first invalid one.
func NewRegistry(types ...EventType) (*Registry, error) {
	r := &Registry{}
	for _, t := range types {
		if err := r.Register(t); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Register adds one event type. Registering a type twice is an error: two contracts for one type would make
// producers disagree.
func (r *Registry) Register(t EventType) error {
	if err := checkText("event type", t.Type, true, MaxTypeLen); err != nil {
		return fmt.Errorf("%w: registry: %w", ErrInvalidConfig, err)
	}
	if err := checkText("topic of event type "+t.Type, t.Topic, true, MaxTopicLen); err != nil {
		return fmt.Errorf("%w: registry: %w", ErrInvalidConfig, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.types == nil {
		r.types = map[string]EventType{}
	}
	if _, dup := r.types[t.Type]; dup {
		return fmt.Errorf("%w: registry: event type %q is registered twice; register each type once", ErrInvalidConfig, t.Type)
	}
	r.types[t.Type] = t
	return nil
}

// Lookup returns the registered event type typ.
func (r *Registry) Lookup(typ string) (EventType, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.types[typ]
	return t, ok
}

// Types returns every registered event type, sorted by type.
func (r *Registry) Types() []EventType {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]EventType, 0, len(r.types))
	for _, t := range r.types {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out
}

// Check reports whether m meets the registry: a known type, on its topic, with a key when one is required, and
// a payload meeting the type's contract. The error wraps ErrInvalidMessage and says what to change.
func (r *Registry) Check(m Message) error {
	t, ok := r.Lookup(m.Type)
	if !ok {
		return invalid("event type %q is not in the registry (known types: %s); register it or fix the type",
			m.Type, r.knownTypes())
	}
	if m.Topic != t.Topic {
		return invalid("event type %q belongs on topic %q, not %q", m.Type, t.Topic, m.Topic)
	}
	if t.KeyRequired && m.Key == "" {
		return invalid("event type %q requires a key; set Message.Key (for example the aggregate ID)", m.Type)
	}
	if t.Payload != nil {
		if err := t.Payload.Check(m.Payload); err != nil {
			return invalid("event type %q: %v", m.Type, err)
		}
	}
	return nil
}

func (r *Registry) knownTypes() string {
	r.mu.RLock()
	names := make([]string, 0, len(r.types))
	for n := range r.types {
		names = append(names, n)
	}
	r.mu.RUnlock()
	if len(names) == 0 {
		return "none"
	}
	slices.Sort(names)
	const shown = 10
	if len(names) > shown {
		return strings.Join(names[:shown], ", ") + fmt.Sprintf(" and %d more", len(names)-shown)
	}
	return strings.Join(names, ", ")
}
