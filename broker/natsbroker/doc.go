// Package natsbroker publishes Postbox messages to NATS JetStream and receives them from a JetStream pull
// consumer.
//
// # Wire format
//
// A message is published to the subject named by its topic, or, with KeyInSubject, to topic + "." +
// KeyToken(key), so consumers can filter or limit by key. Headers follow the CloudEvents NATS binding in binary
// mode (ce-specversion, ce-id, ce-source, ce-type, ce-time, ce-subject and ce-partitionkey = key; user headers
// as they are) and the payload is the body. Nats-Msg-Id is the message ID.
//
// # Dedup
//
// JetStream drops a message whose Nats-Msg-Id it has seen within the stream's Duplicates window (2 minutes by
// default; set StreamConfig.Duplicates), and acknowledges it as a duplicate, which Publish counts as success.
// A relay that republishes a batch after a crash within that window therefore causes no duplicate deliveries;
// beyond it, the consumer's inbox drops them.
//
// # Setup
//
// Streams and consumers are created only when you ask: EnsureStream and EnsureConsumer are thin, explicit
// helpers, and NewPublisher and NewSubscriber do no I/O.
//
//	js, _ := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(30*time.Second))
//	_, err := natsbroker.EnsureStream(ctx, js, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders"}})
//	pub, err := natsbroker.NewPublisher(js, nil)
//	relay, err := postbox.NewRelay(client, pub, nil)
//
//	cons, err := natsbroker.EnsureConsumer(ctx, js, "ORDERS", jetstream.ConsumerConfig{Durable: "billing"})
//	sub, err := natsbroker.NewSubscriber(cons, nil)
//	err = broker.Consume(ctx, sub, consumer, handler, nil) // blocks until ctx is cancelled
//
// The embedded subpackage runs a NATS server with JetStream inside the process, for demos and tests.
package natsbroker
