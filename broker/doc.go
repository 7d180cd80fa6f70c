// Package broker is the contract between Postbox and message brokers: the relay publishes through a
// postbox.Publisher, consumers receive through a Subscriber, and both speak CloudEvents 1.0 in binary content mode
// on the wire.
//
// # Publishing
//
// A broker adapter implements postbox.Publisher. Publish sends a batch and returns nil when the broker
// acknowledged every record, a *postbox.BatchError with one entry per record when some failed, or any other error
// when the whole batch failed. Errors no retry can fix are wrapped with postbox.Permanent. Adapters set the
// broker's own dedup key (NATS Nats-Msg-Id, AMQP message-id, a Pub/Sub attribute…) to the message ID.
//
// # Receiving
//
// A Subscriber calls a DeliveryHandler for each message until its context is cancelled. The handler settles the
// Delivery: Ack when the message's effects are committed, Nack to have it delivered again. AckAfter turns a plain
// message handler into a DeliveryHandler that acks only after the handler returned nil, which is how the inbox is
// wired to a broker:
//
//	handle := broker.AckAfter(func(ctx context.Context, m postbox.Message) error {
//		return postbox.Process(ctx, client, "billing", m, apply) // commits the inbox row and the effects
//	})
//	err := sub.Receive(ctx, handle) // blocks until ctx is cancelled
//
// If the process dies between the commit and the ack, the broker delivers the message again and the inbox
// recognises its ID, so the effects still happen once.
//
// # Wire format
//
// CloudEvents maps a record to broker headers and back. The header-name prefix depends on the transport: see
// PrefixHTTP, PrefixKafka, PrefixAMQP and PrefixMQTT.
//
// # Writing an adapter
//
// Implement postbox.Publisher and Subscriber in a module of your own, wrap each received message with NewDelivery
// and an Acker for the broker, hand it to the handler through Dispatch, and run the conformance suite in
// broker/brokertest against a real broker.
package broker
