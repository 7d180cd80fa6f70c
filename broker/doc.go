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
//
// # The adapter convention
//
// Every adapter in this repository is built the same way, so that moving from one broker to another changes
// names, not shapes:
//
//   - One module per adapter, in broker/<package>: the folder is named after the package, and the package name
//     says it is an adapter (natsbroker, not nats), so it never clashes with the client library's own package
//     in an import block.
//   - Constructors take the client the adapter wraps first, when it wraps one the caller made, and a pointer to
//     the adapter's config last: NewPublisher(client, cfg *PublisherConfig) (*Publisher, error) and
//     NewSubscriber(client, cfg *SubscriberConfig) (*Subscriber, error). Adapters that own their connections
//     (amqpbroker, mqttbroker) or make one per Receive (kafkabroker's subscriber) take only the config, with the
//     address in it. Constructors do no I/O.
//   - Nothing positional beyond the client: group, queue, topics and the like are config fields.
//   - Every config has WithDefaults, which returns a copy with every zero field set to its default (a nil config
//     gives the defaults; each field's comment states its default, and the defaults are exported Default…
//     constants), and an unexported validate, which the constructor runs on the result. Every error from a
//     constructor wraps postbox.ErrInvalidConfig and names the constructor and the field.
//   - Every config has a Logger *slog.Logger field, slog.Default() when nil.
//   - Every Publisher has Close() error, safe to call twice, after which Publish returns an error wrapping the
//     package's exported ErrClosed (retryable: the relay tries again). Close releases what the publisher owns;
//     a client the caller passed in stays open for the caller to close.
//   - Every Subscriber's Receive blocks until its context is cancelled, returns nil then, refuses a nil handler
//     and a second concurrent Receive on the same subscriber.
//   - Publishers that own their connection also have Ping(ctx) error for health checks.
//   - Each adapter's tests run brokertest.Exercise with the Features the broker promises, and test only what is
//     the adapter's own.
//
// # The adapters
//
// Import paths start with github.com/postbox-go/postbox/; Ack, Nack and Reject are what the three Delivery
// calls do on the broker.
//
//	import path             Key maps to                          dedup key (broker)             Ack / Nack / Reject
//	broker/amqpbroker       cloudEvents_partitionkey header;     message-id property            basic.ack / requeue, after the
//	                        last routing-key word with           (RabbitMQ does not dedup)      delay held in the subscriber /
//	                        KeyInRoutingKey                                                     reject: dropped or dead-lettered
//	broker/gcppubsub        ordering key                         ce-id attribute (Pub/Sub       ack / nack, redelivered on the
//	                                                             does not dedup)                subscription's retry policy /
//	                                                                                            ack, or nack with NackRejected
//	broker/kafkabroker      record key (partition)               ce_id header (the idempotent   commit past it / handled again
//	                                                             producer stops the client's    after the delay, partition
//	                                                             own duplicates)                waits / offset committed, skipped
//	broker/kinesisbroker    partition key (shard); partitionkey  id field of the JSON record    past it, in memory / the record
//	                        field of the JSON record             (Kinesis does not dedup)       again after the delay, shard
//	                                                                                            waits / past it
//	broker/mqttbroker       partitionkey user property           id user property (MQTT does    PUBACK, in arrival order /
//	                                                             not dedup)                     session resumed, redelivered
//	                                                                                            with DUP / PUBACK, dropped
//	broker/natsbroker       ce-partitionkey header; last         Nats-Msg-Id (JetStream drops   ack / nak with delay /
//	                        subject token with KeyInSubject      repeats within Duplicates)     term
//	broker/redisstream      ce_partitionkey field                ce_id field (Redis does not    XACK / left pending, claimed
//	                                                             dedup)                         after the delay / XACK, dropped
//	broker/snsbroker        as sqsbroker (SNS delivers to SQS    as sqsbroker, on FIFO topics   (SNS has no consumer: read
//	                        queues, read with sqsbroker)                                        the subscribed SQS queue)
//	broker/sqsbroker        MessageGroupId on FIFO queues;       MessageDeduplicationId on      DeleteMessage / visibility
//	                        ce-partitionkey attribute            FIFO queues (SQS drops         timeout set to the delay /
//	                                                             repeats within 5 minutes)      DeleteMessage, dropped
//	broker/watermillbridge  ce_partitionkey metadata             watermill UUID and ce_id       the watermill router's (the
//	                                                             (per the watermill broker)     inbox middleware returns errors)
//	broker/webhook          ce-partitionkey header; one          ce-id header (the receiver's   2xx / 503 with Retry-After /
//	                        request per key in flight            inbox dedups)                  422
//
// The constructors, with each package named as its folder:
//
//	amqpbroker.NewPublisher(cfg *PublisherConfig)                          amqpbroker.NewSubscriber(cfg *SubscriberConfig)
//	gcppubsub.NewPublisher(*pubsub.Client, cfg *PublisherConfig)           gcppubsub.NewSubscriber(*pubsub.Client, cfg *SubscriberConfig)
//	kafkabroker.NewPublisher(*kgo.Client, cfg *PublisherConfig)            kafkabroker.NewSubscriber(cfg *SubscriberConfig)
//	kinesisbroker.NewPublisher(*kinesis.Client, cfg *PublisherConfig)     kinesisbroker.NewSubscriber(*kinesis.Client, cfg *SubscriberConfig)
//	mqttbroker.NewPublisher(cfg *PublisherConfig)                          mqttbroker.NewSubscriber(cfg *SubscriberConfig)
//	natsbroker.NewPublisher(jetstream.JetStream, cfg *PublisherConfig)     natsbroker.NewSubscriber(jetstream.Consumer, cfg *SubscriberConfig)
//	redisstream.NewPublisher(redis.Cmdable, cfg *PublisherConfig)          redisstream.NewSubscriber(redis.UniversalClient, cfg *SubscriberConfig)
//	snsbroker.NewPublisher(*sns.Client, cfg *PublisherConfig)             (sqsbroker.NewSubscriber on a subscribed queue)
//	sqsbroker.NewPublisher(*sqs.Client, cfg *PublisherConfig)             sqsbroker.NewSubscriber(*sqs.Client, cfg *SubscriberConfig)
//	watermillbridge.NewPublisher(message.Publisher, cfg *PublisherConfig)  watermillbridge.NewMiddleware(*postbox.Consumer, cfg *MiddlewareConfig)
//	webhook.NewPublisher(cfg *PublisherConfig)                             webhook.NewReceiver(cfg *ReceiverConfig), an http.Handler
package broker
