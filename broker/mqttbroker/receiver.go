package mqttbroker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"
	"github.com/postbox-go/postbox/broker"
)

// receiver is one run of Receive: the handler lanes, the current connection, and the requests to reconnect.
type receiver struct {
	ctx    context.Context
	s      *Subscriber
	handle broker.DeliveryHandler
	lanes  *broker.Lanes[item]

	fatal chan error    // a refusal retrying cannot fix; buffered
	wake  chan struct{} // the redelivery deadline moved; buffered

	mu      sync.Mutex
	current *connection
	due     time.Time // reconnect then, so that the server redelivers what was nacked; zero: no need
}

// item is a delivery on its way to a lane.
type item struct {
	d    *broker.Delivery
	conn *connection
}

// connection is one connection manager with the deliveries it handed out.
type connection struct {
	cm       *autopaho.ConnectionManager
	mu       sync.Mutex
	open     bool          // deliveries are dispatched
	closing  chan struct{} // closed when open turns false: frees callbacks waiting for a lane
	inflight sync.WaitGroup
	unsub    context.CancelFunc // cancels the subscribe of the connection that is up
	subs     sync.WaitGroup     // subscribe goroutines
}

func newReceiver(ctx context.Context, s *Subscriber, handle broker.DeliveryHandler) *receiver {
	r := &receiver{ctx: ctx, s: s, handle: handle, fatal: make(chan error, 1), wake: make(chan struct{}, 1)}
	// Buffered, so that paho's router goroutine does not wait for a busy handler: autopaho cannot notice a lost
	// connection and reconnect while that goroutine is blocked. The server sends at most Prefetch unacknowledged
	// messages per connection.
	r.lanes = broker.NewLanes(s.cfg.Concurrency, s.cfg.Prefetch, func(it item) {
		if it.conn.isOpen() { // else it is not acknowledged, and the next connection brings it again
			broker.Dispatch(ctx, it.d, handle)
		}
		it.conn.inflight.Done()
	})
	return r
}

func (r *receiver) stopLanes() { r.lanes.Close() }

// run connects, and reconnects whenever a nack asks for redelivery, until ctx ends or the server refuses the
// subscriber.
func (r *receiver) run() error {
	for {
		c, err := r.connect()
		if err != nil {
			return err
		}
		err = r.wait()
		r.close(c)
		if err != nil || r.ctx.Err() != nil {
			return err
		}
	}
}

// wait returns nil when ctx ends or a redelivery is due, and the error when the server refuses the subscriber.
func (r *receiver) wait() error {
	for {
		r.mu.Lock()
		due := r.due
		r.mu.Unlock()
		var timer <-chan time.Time
		stop := func() bool { return false }
		if !due.IsZero() {
			t := time.NewTimer(time.Until(due))
			timer, stop = t.C, t.Stop
		}
		select {
		case <-r.ctx.Done():
			stop()
			return nil
		case err := <-r.fatal:
			stop()
			return err
		case <-timer:
			return nil
		case <-r.wake:
			stop()
		}
	}
}

// connect starts a connection manager for the session. It connects in the background and retries until closed.
func (r *receiver) connect() (*connection, error) {
	c := &connection{open: true, closing: make(chan struct{})}
	s := r.s
	cfg := s.config(session{clientID: s.cfg.ClientID, expiry: s.cfg.SessionExpiry}, func(cfg *autopaho.ClientConfig) {
		cfg.OnPublishReceived = []func(paho.PublishReceived) (bool, error){
			func(pr paho.PublishReceived) (bool, error) { r.dispatch(c, pr); return true, nil },
		}
		cfg.OnConnectionUp = func(cm *autopaho.ConnectionManager, ack *paho.Connack) {
			if !ack.SessionPresent {
				s.log.WarnContext(r.ctx, "mqttbroker: the server had no session for this subscriber; messages published "+
					"while it was away were not kept for it", "client_id", s.cfg.ClientID)
			}
			// Subscribing again on every connection restores a lost session's subscriptions. It runs apart, bound
			// to this connection: autopaho waits for this callback before it notices a lost connection, and paho
			// waits for a SUBACK that a lost connection never brings until its packet timeout.
			sctx, cancel := context.WithCancel(r.ctx)
			c.mu.Lock()
			c.unsub = cancel
			c.mu.Unlock()
			c.subs.Add(1)
			go func() {
				defer c.subs.Done()
				defer cancel()
				err := s.subscribe(sctx, cm)
				switch {
				case err == nil || sctx.Err() != nil:
				case fatal(err):
					r.fail(err)
				default:
					s.log.WarnContext(r.ctx, "mqttbroker: subscribe failed; reconnecting", "client_id", s.cfg.ClientID, "err", err)
					r.redeliverAfter(c, 0)
				}
			}()
		}
		cfg.OnConnectionDown = func() bool {
			c.mu.Lock()
			if c.unsub != nil {
				c.unsub()
			}
			c.mu.Unlock()
			s.log.WarnContext(r.ctx, "mqttbroker: subscriber lost its connection; reconnecting", "client_id", s.cfg.ClientID)
			return true
		}
		cfg.OnConnectError = func(err error) {
			if fatal(err) {
				r.fail(err)
				return
			}
			s.log.WarnContext(r.ctx, "mqttbroker: subscriber cannot connect; retrying", "client_id", s.cfg.ClientID, "err", err)
		}
	})
	r.mu.Lock()
	r.current, r.due = c, time.Time{}
	r.mu.Unlock()
	cm, err := autopaho.NewConnection(context.WithoutCancel(r.ctx), cfg) // ends with close
	if err != nil {
		return nil, fmt.Errorf("mqttbroker: %w", err)
	}
	c.cm = cm
	return c, nil
}

func (r *receiver) fail(err error) {
	select {
	case r.fatal <- fmt.Errorf("mqttbroker: subscriber %q: %w", r.s.cfg.ClientID, err):
	default:
	}
}

// close stops dispatching c's messages, waits for the handlers running and for paho to send their
// acknowledgements, then disconnects, keeping the session. Messages of c still waiting for a handler are left
// unacknowledged, for the next connection.
func (r *receiver) close(c *connection) {
	c.mu.Lock()
	c.open = false
	close(c.closing)
	c.mu.Unlock()
	c.inflight.Wait()
	// paho sends acknowledgements every ackInterval, in arrival order; give it time to send the last ones. An
	// acknowledgement it did not send means the message comes again, which the inbox absorbs.
	t := time.NewTimer(3 * ackInterval)
	<-t.C
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), r.s.cfg.ConnectTimeout)
	defer cancel()
	_ = c.cm.Disconnect(ctx) // the session stays; what is unacknowledged comes again on the next connection
	c.mu.Lock()
	if c.unsub != nil {
		c.unsub()
	}
	c.mu.Unlock()
	c.subs.Wait()
}

// dispatch hands a received message to its lane. It runs on paho's router goroutine, one message at a time.
func (r *receiver) dispatch(c *connection, pr paho.PublishReceived) {
	c.mu.Lock()
	if !c.open {
		c.mu.Unlock()
		return // not acknowledged: the server sends it again on the next connection
	}
	c.inflight.Add(1)
	c.mu.Unlock()
	e, err := decode(pr.Packet)
	if err != nil {
		r.s.log.ErrorContext(r.ctx, "mqttbroker: dropping a message that is not a Postbox CloudEvent", "topic", pr.Packet.Topic, "err", err)
		_ = pr.Client.Ack(pr.Packet) // MQTT cannot reject: acknowledging drops it
		c.inflight.Done()
		return
	}
	attempt := 1
	if pr.Packet.Duplicate() {
		attempt = 0 // delivered before, how often the server does not say
	}
	d := broker.NewDelivery(e, attempt, &acker{r: r, conn: c, client: pr.Client, pkt: pr.Packet})
	select {
	case r.lanes.For(e.Message.Key) <- item{d: d, conn: c}:
	case <-c.closing:
		c.inflight.Done()
	}
}

func (c *connection) isOpen() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open
}

// redeliverAfter asks for a reconnection after delay, if c is still the current connection: resuming the session
// is the only way MQTT delivers an unacknowledged message again.
func (r *receiver) redeliverAfter(c *connection, delay time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.current != c || r.ctx.Err() != nil {
		return // a newer connection gets the message again anyway
	}
	at := time.Now().Add(delay)
	if r.due.IsZero() || at.Before(r.due) {
		r.due = at
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}

// errConnectionLost: the delivery came on a connection that has since dropped.
var errConnectionLost = errors.New("the connection the message came on was lost; the server delivers it again")

// acker settles one MQTT delivery.
type acker struct {
	r      *receiver
	conn   *connection
	client *paho.Client
	pkt    *paho.Publish
}

// Ack marks the message acknowledged; paho sends the PUBACK once every message received before it is
// acknowledged too, as MQTT requires. MQTT does not confirm a PUBACK: an acknowledgement lost with its
// connection means the message comes again.
func (a *acker) Ack(context.Context) error {
	select {
	case <-a.client.Done():
		return errConnectionLost
	default:
	}
	return a.client.Ack(a.pkt)
}

// Nack leaves the message unacknowledged and has the subscriber reconnect after delay, resuming its session, so
// that the server sends it again: MQTT has no other way to redeliver. Every message not yet acknowledged when the
// connection is replaced (the ones after this one among them, whose PUBACKs must wait for this one) comes again.
func (a *acker) Nack(_ context.Context, delay time.Duration) error {
	a.r.redeliverAfter(a.conn, delay)
	return nil
}

// Reject acknowledges the message, which drops it: MQTT has no dead-lettering.
func (a *acker) Reject(ctx context.Context) error { return a.Ack(ctx) }

var _ broker.Rejecter = (*acker)(nil)
