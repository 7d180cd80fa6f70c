// Package gcppubsub publishes Postbox messages to Google Cloud Pub/Sub with ordering keys and receives them from a
// subscription through the client's streaming pull.
//
// # Wire format
//
// A message is published to the topic whose ID is its topic (with PublisherConfig.TopicPrefix before it). Its
// ordering key is the message key, so Pub/Sub delivers the messages of one key in publish order; a message
// without a key has no ordering key and no order. Attributes follow the CloudEvents Pub/Sub binding in binary mode
// (ce-specversion, ce-id = message ID, ce-source, ce-type, ce-time = enqueue time, ce-subject and
// ce-partitionkey = key; user headers such as content-type, traceparent and tracestate as they are) and the
// payload is the data.
//
// # Dedup
//
// Pub/Sub does not dedup publishes: a message published twice (a relay retrying a batch whose results it never
// saw, a relay restarting) is stored twice, with two Pub/Sub message IDs. Exactly-once delivery, a subscription
// setting (EnableExactlyOnceDelivery), only stops Pub/Sub from delivering one stored message again after its ack
// succeeded; it does not merge copies. The ce-id attribute carries the Postbox message ID, by which the consumer's
// inbox drops every copy after the first.
//
// # Delivery
//
// At least once. The subscription must have message ordering (EnsureSubscription turns it on); the publisher
// enables ordering on its side and resumes a key after a failed publish. The Pub/Sub client hands the messages of
// one ordering key to the handler one at a time, in order; other messages run in parallel up to
// SubscriberConfig.Concurrency. A nacked message is delivered again after the subscription's retry-policy backoff;
// Pub/Sub cannot delay one message, so the nack delay is not used. When a message with an ordering key is nacked,
// Pub/Sub delivers it again together with the later messages of its key, so a handler can see those later
// messages before the nacked one succeeds, and then again; the inbox drops the repeats. Reject acks (drops) the
// message, or with SubscriberConfig.NackRejected nacks it for the subscription's dead-letter policy.
// Delivery.Attempt is Pub/Sub's delivery attempt, which Pub/Sub reports only on subscriptions with a dead-letter
// policy (0 otherwise). A message a handler leaves unsettled is delivered again once SubscriberConfig.MaxExtension
// has passed.
//
// # Setup
//
// Topics and subscriptions are created only when you ask: EnsureTopic and EnsureSubscription are thin, explicit
// helpers, and NewPublisher and NewSubscriber do no I/O.
//
//	c, _ := pubsub.NewClient(ctx, "my-project")
//	_, err := gcppubsub.EnsureTopic(ctx, c, "orders")
//	pub, err := gcppubsub.NewPublisher(c, nil)
//	defer pub.Close()
//	relay, err := postbox.NewRelay(client, pub, nil)
//
//	_, err = gcppubsub.EnsureSubscription(ctx, c, &pubsubpb.Subscription{Name: "billing", Topic: "orders"})
//	sub, err := gcppubsub.NewSubscriber(c, &gcppubsub.SubscriberConfig{Subscription: "billing", Topic: "orders"})
//	err = broker.Consume(ctx, sub, consumer, handler, nil) // blocks until ctx is cancelled
package gcppubsub
