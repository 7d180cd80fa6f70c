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
// A Subscriber calls a DeliveryHandler for each message until its context is cancelled; the handler settles the
// Delivery: Ack when the message's effects are committed, Nack to have it delivered again, Reject to drop it for
// good. Consume wires a Subscriber to a postbox.Consumer, so that each message is processed exactly once with its
// inbox row and settled by the outcome, with no glue:
//
//	consumer, err := postbox.NewConsumer(client, "billing", nil)
//	if err != nil {
//		return err
//	}
//	// Blocks until ctx is cancelled. apply is a postbox.Handler: it writes on tx and returns the messages to enqueue.
//	err = broker.Consume(ctx, sub, consumer, apply, nil)
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
