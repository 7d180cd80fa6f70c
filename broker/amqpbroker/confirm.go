package amqpbroker

import (
	"context"
	"errors"
	"fmt"
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"
)

// errUnroutable is wrapped by the error of a message the broker returned because no queue was bound to its
// routing key.
var errUnroutable = errors.New("unroutable")

// confirmChannel is a channel in confirm mode that tells each publish whether the broker took it.
//
// RabbitMQ sends basic.return for an unroutable mandatory message before the basic.ack for it, but amqp091
// hands returns and confirmations to listeners on separate Go channels. One goroutine (run) reads both, in the
// order the connection's reader sends them, so by the time it sees a message's confirmation it has seen the
// message's return. A DeferredConfirmation alone can resolve before the return is looked at.
type confirmChannel struct {
	ch *amqp.Channel

	mu       sync.Mutex
	waiting  map[uint64]*confirmWait // by delivery tag
	early    map[uint64]bool         // confirmations (ack or nack) that came before their publish was registered
	returned map[returnKey]int       // returns not yet matched with their confirmation
	dead     chan struct{}           // closed when the channel is closed; err says why
	err      error
}

type confirmWait struct {
	key  returnKey
	done chan error // buffered: receives the publish's outcome once
}

// returnKey identifies a returned message. Two publishes of one ID with one routing key route alike, so a return
// may be matched with either.
type returnKey struct{ id, exchange, routingKey string }

// openConfirmChannel opens a channel on conn in confirm mode and starts, through spawn, the goroutine that
// settles publishes, which ends when the channel closes. spawn returns false when it refuses to start goroutines
// (the publisher is closed).
func openConfirmChannel(conn *amqp.Connection, spawn func(func()) bool) (*confirmChannel, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("open channel: %w", err)
	}
	if err := ch.Confirm(false); err != nil {
		_ = ch.Close()
		return nil, fmt.Errorf("put channel in confirm mode: %w", err)
	}
	c := &confirmChannel{
		ch:       ch,
		waiting:  map[uint64]*confirmWait{},
		early:    map[uint64]bool{},
		returned: map[returnKey]int{},
		dead:     make(chan struct{}),
	}
	// The reader blocks sending to these until run takes them (amqp091 gives up after 5 seconds). run does
	// nothing but bookkeeping, so it is always ready. returns must be unbuffered: a buffered return could be
	// taken after the confirmation that follows it.
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, 256))
	returns := ch.NotifyReturn(make(chan amqp.Return))
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	if !spawn(func() { c.run(confirms, returns, closed) }) {
		_ = ch.Close()
		return nil, ErrClosed
	}
	return c, nil
}

func (c *confirmChannel) run(confirms <-chan amqp.Confirmation, returns <-chan amqp.Return, closed <-chan *amqp.Error) {
	for {
		select {
		case r, ok := <-returns:
			if !ok {
				returns = nil
				continue
			}
			c.mu.Lock()
			c.returned[returnKey{r.MessageId, r.Exchange, r.RoutingKey}]++
			c.mu.Unlock()
		case conf, ok := <-confirms:
			if !ok {
				// amqp091 closes the close listeners before the confirmation listeners.
				var reason error = amqp.ErrClosed
				if e, ok := <-closed; ok && e != nil {
					reason = e
				}
				c.close(reason)
				return
			}
			c.mu.Lock()
			if w, ok := c.waiting[conf.DeliveryTag]; ok {
				delete(c.waiting, conf.DeliveryTag)
				w.done <- c.outcome(w.key, conf.Ack)
			} else {
				c.early[conf.DeliveryTag] = conf.Ack
			}
			c.mu.Unlock()
		}
	}
}

// outcome is the result of a confirmed publish. c.mu must be held.
func (c *confirmChannel) outcome(k returnKey, ack bool) error {
	if n := c.returned[k]; n > 0 {
		if n == 1 {
			delete(c.returned, k)
		} else {
			c.returned[k] = n - 1
		}
		return fmt.Errorf("%w: no queue is bound to exchange %q with a key matching %q; bind one (EnsureTopology) "+
			"before publishing", errUnroutable, k.exchange, k.routingKey)
	}
	if !ack {
		return errors.New("the broker refused the message (basic.nack); it may be out of resources")
	}
	return nil
}

// close fails every publish still waiting.
func (c *confirmChannel) close(reason error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.err = fmt.Errorf("channel closed before the broker confirmed the message (it may still be delivered): %w", reason)
	for tag, w := range c.waiting {
		w.done <- c.err
		delete(c.waiting, tag)
	}
	close(c.dead)
}

// isDead reports whether the channel has closed.
func (c *confirmChannel) isDead() bool {
	select {
	case <-c.dead:
		return true
	default:
		return false
	}
}

// publish sends msg as mandatory and returns a channel that receives its outcome.
func (c *confirmChannel) publish(ctx context.Context, exchange, routingKey string, msg amqp.Publishing) (<-chan error, error) {
	dc, err := c.ch.PublishWithDeferredConfirmWithContext(ctx, exchange, routingKey, true, false, msg)
	if err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	k := returnKey{msg.MessageId, exchange, routingKey}
	c.mu.Lock()
	defer c.mu.Unlock()
	if ack, ok := c.early[dc.DeliveryTag]; ok {
		delete(c.early, dc.DeliveryTag)
		done <- c.outcome(k, ack)
	} else if c.isDead() {
		done <- c.err
	} else {
		c.waiting[dc.DeliveryTag] = &confirmWait{key: k, done: done}
	}
	return done, nil
}
