// Package sqsbroker publishes Postbox messages to Amazon SQS queues, standard and FIFO, with SendMessageBatch, and
// receives them for broker.Consume.
//
// # Wire format
//
// A message goes to the queue named QueuePrefix + topic + QueueSuffix (its URL looked up once with GetQueueUrl),
// or to PublisherConfig.QueueURL when set. The body is the payload when it is non-empty text SQS accepts;
// otherwise it is the payload in base64, with the message attribute postbox-body = "base64" ("empty" for an
// empty payload, with a body of one space, since SQS refuses an empty body). The CloudEvents attributes are
// String message attributes with the HTTP binding's names (ce-specversion, ce-id = message ID, ce-source,
// ce-type, ce-time = enqueue time, ce-partitionkey = key; ce-subject, which repeats the key, is left out), and
// user headers (content-type, traceparent, tracestate first) follow as attributes of their own names.
//
// SQS allows 10 message attributes. When there are more, or a header's name or value is not one SQS allows as a
// message attribute (names: letters, digits, '-', '_' and '.'; values: non-empty), the first nine stay separate
// and the rest travel together as one JSON object in the attribute postbox-headers; the subscriber unpacks it,
// so a Postbox consumer sees every header, but an SQS filter or another consumer sees the packed ones only as
// JSON. Nothing is dropped. A message over PublisherConfig.MaxMessageBytes (256 KiB by default: body, attribute
// names, types and values) fails as permanent.
//
// # FIFO queues and dedup
//
// On a FIFO queue (its name ends in ".fifo") the message key is the MessageGroupId, so SQS keeps each key's
// messages in publish order and hands out one key's messages one at a time; a key that is not a valid group ID
// (1 to 128 printable ASCII characters) becomes "sha256-" and its SHA-256 in hex, still one group per key.
// Messages without a key all go to the group PublisherConfig.DefaultGroup ("postbox"), in order with each other.
// The message ID is the MessageDeduplicationId: SQS drops a repeat of a message ID sent within five minutes (a
// relay retrying a batch whose answer it never saw), and the consumer's inbox drops anything later. Standard
// queues neither order nor dedup: the inbox drops the duplicates.
//
// # Errors
//
// Throttling (ThrottlingException, RequestThrottled, KMS throttling) and SQS's server errors are
// postbox.Unavailable: the relay holds the destination's messages and probes it instead of counting failed
// attempts. Entries SendMessageBatch refuses as the sender's fault are postbox.Permanent. A missing queue, a
// missing permission and refused credentials say which setting or IAM action (sqs:SendMessage,
// sqs:GetQueueUrl, sqs:ReceiveMessage, sqs:DeleteMessage, sqs:ChangeMessageVisibility) is missing.
//
// # Delivery
//
// At least once. Ack deletes the message, Nack sets its visibility timeout to the nack delay (whole seconds, at
// most 12 hours), Reject deletes it. Delivery.Attempt is SQS's ApproximateReceiveCount. A message a handler
// leaves unsettled, or whose subscriber stopped, is delivered again once its visibility timeout
// (SubscriberConfig.VisibilityTimeout, or the queue's) passes.
//
// # Setup
//
// Credentials, region and endpoint come from the aws.Config the client was made with: config.LoadDefaultConfig
// reads the SDK's default chain (environment, shared config and credentials files, SSO, the container or
// instance role), and BaseEndpoint overrides the endpoint (a VPC endpoint, a local emulator).
//
//	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion("eu-west-1"))
//	c := sqs.NewFromConfig(cfg)
//	_, err = sqsbroker.EnsureQueue(ctx, c, "orders.fifo", nil)
//	pub, err := sqsbroker.NewPublisher(c, &sqsbroker.PublisherConfig{QueueSuffix: ".fifo"})
//	relay, err := postbox.NewRelay(client, pub, nil)
//
//	sub, err := sqsbroker.NewSubscriber(c, &sqsbroker.SubscriberConfig{QueueURL: url, Topic: "orders"})
//	err = broker.Consume(ctx, sub, consumer, handler, nil) // blocks until ctx is cancelled
package sqsbroker
