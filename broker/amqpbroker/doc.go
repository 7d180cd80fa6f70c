// Package amqpbroker publishes Postbox messages to RabbitMQ over AMQP 0-9-1 and consumes them from a queue,
// with github.com/rabbitmq/amqp091-go.
//
// # Wire format
//
// A message is published to one exchange (a topic exchange; "amq.topic" by default) with the topic as routing
// key, or with KeyInRoutingKey the topic and KeyToken(key) as one more word, so bindings can select by key.
// Headers follow the CloudEvents AMQP binding in binary mode: the attributes are headers with the prefix
// "cloudEvents_" (cloudEvents_specversion, cloudEvents_id, cloudEvents_source, cloudEvents_type,
// cloudEvents_time, cloudEvents_subject and cloudEvents_partitionkey = key), user headers travel as they are,
// the content-type header becomes the content-type property, and the payload is the body. The message-id
// property is the message ID. Subscribers also read the older "cloudEvents:" prefix.
//
// # Guarantees
//
// Publishing uses publisher confirms and the mandatory flag: Publish returns nil for a message only after
// RabbitMQ confirmed it, and a message no queue is bound for comes back as an error instead of vanishing. Messages
// are persistent by default.
//
// RabbitMQ does not deduplicate. The message-id property is for consumers: the Postbox inbox uses the message ID
// to apply each message once, which absorbs the duplicates that a relay's retry after a lost confirmation, or a
// redelivery after a lost ack, produce.
//
// A queue delivers in publish order (per publishing channel) to a single consumer; requeued messages and several
// competing consumers break that order. Per-key order holds for one Subscriber at any Concurrency, as long as no
// message is nacked.
//
// # Setup
//
// Exchanges, queues and bindings are declared only when you ask: EnsureTopology is a thin, explicit helper, and
// NewPublisher and NewSubscriber do no I/O. Publishers and subscribers own their connections and reconnect with
// backoff.
//
//	conn, _ := amqp.Dial(url)
//	err := amqpbroker.EnsureTopology(ctx, conn, amqpbroker.Topology{Queue: "billing", QueueType: amqpbroker.QueueQuorum,
//		Topics: []string{"orders"}})
//	pub, err := amqpbroker.NewPublisher(&amqpbroker.PublisherConfig{ConnConfig: amqpbroker.ConnConfig{URL: url}})
//	defer pub.Close()
//	relay, err := postbox.NewRelay(client, pub, nil)
//
//	sub, err := amqpbroker.NewSubscriber(&amqpbroker.SubscriberConfig{ConnConfig: amqpbroker.ConnConfig{URL: url},
//		Queue: "billing"})
//	err = broker.Consume(ctx, sub, consumer, handler, nil) // blocks until ctx is cancelled
package amqpbroker
