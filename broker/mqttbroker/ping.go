package mqttbroker

import "context"

// Ping reports whether the publisher can publish: it returns nil once its connection to the server is up,
// starting the connection manager if need be and waiting at most ConnectTimeout, and otherwise the last
// connection error. A health check can call it; the connection is the one Publish uses.
func (p *Publisher) Ping(ctx context.Context) error {
	_, err := p.connected(ctx)
	return err
}
