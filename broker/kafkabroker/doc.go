// Package kafkabroker publishes Postbox messages to Kafka with franz-go's idempotent producer and receives them
// as a member of a consumer group, committing offsets only past messages whose handler settled them.
//
// # Wire format
//
// A message becomes one record on the topic named by its topic (with PublisherConfig.TopicPrefix before it).
// The record key is the message key, so Kafka's partitioner puts every message of a key in one partition, in
// publish order. A message without a key gets no record key (null): the client's partitioner spreads such
// records over the partitions (franz-go's default fills one partition for a while, then moves on), and they
// have no order among themselves. Headers follow the CloudEvents Kafka binding in binary mode (ce_specversion,
// ce_id = message ID, ce_source, ce_type, ce_time = enqueue time, ce_subject and ce_partitionkey = key; user
// headers such as content-type, traceparent and tracestate as they are) and the payload is the record value.
// The record timestamp is the produce time.
//
// # Debezium's outbox layout
//
// With PublisherConfig.Debezium set, the publisher writes each message as Debezium's Outbox Event Router writes
// the outbox row the message stands for (package debezium reproduces the router byte for byte): by default topic
// "outbox.event." + the message topic, key the message key as JsonConverter writes it ("1" in quotes; null,
// the four bytes, when the message has none, as the router writes a NULL aggregateid), value the payload as a JSON string, and the message ID in an "id" header,
// with no ce_ headers. The message is the row: ID = id, Topic = aggregatetype, Key = aggregateid, Type = type,
// Payload = payload, CreatedAt = timestamp, and each header a column of its own name, so that
// table.fields.additional.placement can place "type" or "traceparent" as a header or in an envelope. Consumers
// of a Debezium outbox read these records unchanged; docs/DEBEZIUM.md maps every router option.
//
//	pub, err := kafkabroker.NewPublisher(cl, &kafkabroker.PublisherConfig{Debezium: &debezium.Options{}})
//
// The partition placement is refused: the record key chooses the partition.
//
// # Dedup
//
// The idempotent producer lets the broker drop a batch the client sends again after a lost response: the broker
// remembers the producer ID, epoch and sequence numbers of the last five batches per partition. That covers
// the client's own retries within one producer session (one client, until the epoch is bumped) and nothing
// else: a message Publish is called with again — a relay retrying a batch whose acks it never saw, or a relay
// restarting — is a new record, and Kafka delivers it again. Kafka keeps no record of message IDs. Consumers
// dedup such copies by the ce_id header, which is what the inbox does.
//
// # Delivery
//
// The subscriber handles the messages of a partition one at a time, in offset order; partitions run in
// parallel, up to SubscriberConfig.Concurrency. Offsets are committed only past messages that were acked (or
// rejected), every CommitInterval, when partitions are revoked, and when Receive returns. A nacked message is
// handed over again by the same subscriber after the nack delay, holding back its partition, and is never
// committed past, so after a crash or a rebalance the next owner receives it again. Delivery.Attempt counts the
// deliveries of a message by this subscriber since it got the partition: it starts again at 1 on another
// member or after a restart, since Kafka does not count deliveries. Kafka has no ack timeout: a handler that
// hangs holds its partition until it returns, so handlers must return when their context ends.
//
// # Setup
//
// Topics are created only when you ask: EnsureTopic is a thin, explicit helper, and NewPublisher and
// NewSubscriber do no I/O.
//
//	cl, _ := kgo.NewClient(kgo.SeedBrokers("localhost:9092"))
//	err := kafkabroker.EnsureTopic(ctx, cl, kafkabroker.TopicConfig{Name: "orders", Partitions: 12})
//	pub, err := kafkabroker.NewPublisher(cl, nil)
//	relay, err := postbox.NewRelay(client, pub, nil)
//
//	sub, err := kafkabroker.NewSubscriber(&kafkabroker.SubscriberConfig{
//		Brokers: []string{"localhost:9092"}, Group: "billing", Topics: []string{"orders"}})
//	err = broker.Consume(ctx, sub, consumer, handler, nil) // blocks until ctx is cancelled
package kafkabroker
