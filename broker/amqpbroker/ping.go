package amqpbroker

import "context"

// Ping reports whether the publisher can publish: it returns nil once a confirm channel to RabbitMQ is open,
// connecting first if need be, and otherwise the reason there is none (the last connection error, a blocked
// connection, ErrClosed). A health check can call it; the connection it opens is the one Publish uses.
func (p *Publisher) Ping(ctx context.Context) error {
	_, err := p.channel(ctx)
	return err
}
