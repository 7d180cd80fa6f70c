// Package watermillbridge connects Postbox to github.com/ThreeDotsLabs/watermill, so that watermill users adopt
// the outbox and the inbox without leaving their router.
//
// # Publishing through watermill
//
// NewPublisher turns any watermill message.Publisher (Kafka, AMQP, SQL, Google Cloud Pub/Sub, NATS, HTTP…) into
// the postbox.Publisher the relay needs. Each record becomes one watermill message: UUID = the Postbox message
// ID, payload = the payload, metadata = the CloudEvents attributes (ce_id, ce_type, ce_source, ce_time,
// ce_subject and ce_partitionkey = the key) and the user headers. Each message is published with a Publish call
// of its own, so a failure is reported for that message alone.
//
//	pub, err := watermillbridge.NewPublisher(kafkaPublisher, nil)
//	relay, err := postbox.NewRelay(client, pub, nil)
//
// Dedup and order are the watermill publisher's and its broker's: the bridge adds none. The message ID in
// ce_id (and the UUID) is what the consumers' inbox deduplicates by. Watermill has no message key; Mapping.Key
// reads it back from the metadata, for instance for a Kafka partitioning marshaler.
//
// # Handling messages once
//
// NewMiddleware returns a watermill HandlerMiddleware that runs each handler call through a Postbox consumer
// (postbox.Consumer.ProcessFrom): one transaction holds the inbox claim of the message ID, the handler's writes,
// and the messages the handler returns, which go to the outbox instead of being published by the router. The
// relay publishes them after the commit. A duplicate delivery is acked without running the handler. A message
// that can never be processed returns a permanent error, for middleware.PoisonQueue to park.
//
//	consumer, err := postbox.NewConsumer(client, "billing", nil)
//	inbox, err := watermillbridge.NewMiddleware(consumer, nil)
//	router.AddMiddleware(inbox)
//	router.AddHandler("bill", "orders", sub, "invoices", pub, func(msg *message.Message) ([]*message.Message, error) {
//		tx, _ := watermillbridge.Tx[pgx.Tx](msg)
//		if _, err := tx.Exec(msg.Context(), "INSERT INTO invoices …"); err != nil {
//			return nil, err
//		}
//		out := message.NewMessage(watermill.NewUUID(), payload)
//		watermillbridge.Mapping{}.SetType(out, "invoice.created")
//		return message.Messages{out}, nil // enqueued to topic "invoices" in the same transaction
//	})
//
// The inbox deduplicates by the CloudEvents id when the metadata has one (messages published by Postbox) and by
// the watermill UUID otherwise, so messages from plain watermill publishers are handled once too, provided
// their UUID is set and kept by the transport.
package watermillbridge
