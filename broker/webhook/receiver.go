package webhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
)

// ReceiverConfig configures a Receiver.
type ReceiverConfig struct {
	// Verifier checks every request's signature; its Secrets are required. Its AllowUnsignedHeaders is
	// ignored: a Receiver trusts the topic, type, key and headers, so it always requires them signed.
	Verifier Verifier
	// Logger receives refused requests. Default: slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns a copy of c with every zero field set to its default. A nil c gives the defaults.
func (c *ReceiverConfig) WithDefaults() ReceiverConfig {
	var out ReceiverConfig
	if c != nil {
		out = *c
	}
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	out.Verifier.Secrets = append([]string(nil), out.Verifier.Secrets...)
	out.Verifier.AllowUnsignedHeaders = false
	return out
}

func (c ReceiverConfig) validate() error {
	if len(c.Verifier.Secrets) == 0 {
		return errors.New("ReceiverConfig.Verifier.Secrets is empty; set the secret the sender signs with")
	}
	if _, err := c.Verifier.keys(); err != nil {
		return fmt.Errorf("ReceiverConfig.%w", err)
	}
	if c.Verifier.MaxSkew < 0 || c.Verifier.MaxBodyBytes < 0 {
		return errors.New("ReceiverConfig.Verifier.MaxSkew and MaxBodyBytes must not be negative (0 means the default)")
	}
	return nil
}

// Receiver is the receiving end: an http.Handler to mount on your server, and a broker.Subscriber whose Receive
// passes each verified request to a handler and answers according to how the handler settled it: 204 for an
// ack, 503 for a nack (the sender retries; Retry-After carries the nack delay), 422 for a reject (the sender
// parks the message as dead). Requests that arrive while no Receive runs get 503.
type Receiver struct {
	verifier Verifier
	ce       broker.CloudEvents
	log      *slog.Logger

	mu       sync.Mutex
	handle   broker.DeliveryHandler
	stopping context.Context // the running Receive's context
	inflight sync.WaitGroup
}

// NewReceiver checks cfg and returns a receiver. It does no I/O. Errors wrap postbox.ErrInvalidConfig.
func NewReceiver(cfg *ReceiverConfig) (*Receiver, error) {
	c := cfg.WithDefaults()
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("%w: webhook: %w", postbox.ErrInvalidConfig, err)
	}
	return &Receiver{verifier: c.Verifier, log: c.Logger,
		ce: broker.CloudEvents{Prefix: broker.PrefixHTTP, PercentEncode: true}}, nil
}

// Receive serves requests to handle until ctx is cancelled, then waits for the requests being handled and
// returns nil (see broker.Subscriber). Requests are handled concurrently, as the server calls ServeHTTP; a sender
// that orders by key (Publisher does) keeps one request per key in flight.
func (r *Receiver) Receive(ctx context.Context, handle broker.DeliveryHandler) error {
	if handle == nil {
		return errors.New("webhook: Receive needs a handler; to process through the inbox, use broker.Consume")
	}
	r.mu.Lock()
	if r.handle != nil {
		r.mu.Unlock()
		return errors.New("webhook: Receive is already running on this receiver")
	}
	r.handle, r.stopping = handle, ctx
	r.mu.Unlock()
	<-ctx.Done()
	r.mu.Lock()
	r.handle, r.stopping = nil, nil
	r.mu.Unlock()
	r.inflight.Wait()
	return nil
}

// ServeHTTP verifies, decodes and hands one message to the running Receive.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "webhook: only POST is accepted", http.StatusMethodNotAllowed)
		return
	}
	body, status, err := readBody(w, req, r.verifier.maxBody())
	if err == nil {
		status, err = http.StatusUnauthorized, r.verifier.Verify(req.Header, body)
	}
	var e broker.Event
	if err == nil {
		status = http.StatusBadRequest
		e, err = r.decode(req.Header, body)
	}
	if err != nil {
		r.log.WarnContext(req.Context(), "webhook: request refused", "status", status, "err", err, "remote", req.RemoteAddr)
		http.Error(w, err.Error(), status)
		return
	}

	r.mu.Lock()
	handle, stopping := r.handle, r.stopping
	if handle != nil {
		r.inflight.Add(1)
	}
	r.mu.Unlock()
	if handle == nil {
		http.Error(w, "webhook: not receiving right now; try again", http.StatusServiceUnavailable)
		return
	}
	defer r.inflight.Done()

	// The handler's context ends with the request or with Receive, whichever first.
	ctx, cancel := context.WithCancel(req.Context())
	defer cancel()
	stop := context.AfterFunc(stopping, cancel)
	defer stop()

	attempt, _ := strconv.Atoi(req.Header.Get(HeaderAttempt))
	out := &outcome{}
	broker.Dispatch(ctx, broker.NewDelivery(e, attempt, out), handle)
	switch out.how {
	case "ack":
		w.WriteHeader(http.StatusNoContent)
	case "reject":
		http.Error(w, "webhook: the receiver rejected the message", http.StatusUnprocessableEntity)
	default:
		if s := int((out.delay + time.Second - 1) / time.Second); s > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(s))
		}
		http.Error(w, "webhook: the receiver could not process the message yet", http.StatusServiceUnavailable)
	}
}

// decode reads the message from the CloudEvents headers, restoring user header names from Postbox-Headers.
func (r *Receiver) decode(h http.Header, body []byte) (broker.Event, error) {
	flat := make(map[string]string, 8)
	for name, v := range h {
		if strings.HasPrefix(strings.ToLower(name), broker.PrefixHTTP) && len(v) > 0 {
			flat[strings.ToLower(name)] = v[0]
		}
	}
	if list := h.Get(HeaderHeaders); list != "" {
		for _, name := range strings.Split(list, ",") {
			if vs := h.Values(name); len(vs) > 0 {
				flat[name] = vs[0]
			}
		}
	}
	e, err := r.ce.Decode(flat, body)
	if err != nil {
		return broker.Event{}, err
	}
	if e.Message.Topic = h.Get(HeaderTopic); e.Message.Topic == "" {
		return broker.Event{}, fmt.Errorf("webhook: message %s has no %s header", e.Message.ID, HeaderTopic)
	}
	if id := h.Get(HeaderID); id != e.Message.ID {
		// The signature covers webhook-id; ce-id must agree, or the inbox would dedup on an unsigned value.
		return broker.Event{}, fmt.Errorf("webhook: %s %q differs from ce-id %q", HeaderID, id, e.Message.ID)
	}
	return e, nil
}

// outcome records how the handler settled a request's delivery; ServeHTTP answers after Dispatch returns.
type outcome struct {
	how   string
	delay time.Duration
}

func (o *outcome) Ack(context.Context) error { o.how = "ack"; return nil }
func (o *outcome) Nack(_ context.Context, d time.Duration) error {
	o.how, o.delay = "nack", d
	return nil
}
func (o *outcome) Reject(context.Context) error { o.how = "reject"; return nil }
