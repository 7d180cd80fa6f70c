// Package snsbroker publishes Postbox messages to Amazon SNS topics, standard and FIFO, with PublishBatch.
//
// SNS has no consumer of its own: subscribe an SQS queue to the topic with raw message delivery (SubscribeQueue)
// and receive from the queue with broker/sqsbroker's Subscriber, which reads the same wire format.
//
// # Wire format
//
// As broker/sqsbroker's: a message goes to the topic TopicARNPrefix + topic + TopicSuffix, or to TopicARN. The
// CloudEvents attributes and the headers are String message attributes (ce-specversion, ce-id, ce-source,
// ce-type, ce-time, ce-partitionkey = key; content-type, traceparent and tracestate first); past the 10 that SNS
// delivers raw to SQS, or for a name or value SNS refuses, the rest travel as one JSON object in the attribute
// postbox-headers. The body is the payload when it is non-empty text, and its base64 otherwise, with
// postbox-body = "base64" ("empty" for an empty payload). A message over 256 KiB fails as permanent.
//
// # FIFO topics and dedup
//
// On a FIFO topic (its name ends in ".fifo") the key is the MessageGroupId (PublisherConfig.DefaultGroup,
// "postbox", without a key; a key that is not a valid group ID becomes its SHA-256) and the message ID the
// MessageDeduplicationId: SNS drops a repeat within five minutes and passes both on to its FIFO queues.
// Standard topics neither order nor dedup; the consumer's inbox drops the duplicates.
//
// # Errors
//
// Throttling (Throttled, KMSThrottling) and SNS's server errors are postbox.Unavailable; entries refused as the
// sender's fault are permanent; a missing topic (NotFound) or permission (AuthorizationError: sns:Publish) says
// what to fix.
//
//	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion("eu-west-1"))
//	c := sns.NewFromConfig(cfg)
//	pub, err := snsbroker.NewPublisher(c, &snsbroker.PublisherConfig{TopicARNPrefix: "arn:aws:sns:eu-west-1:123456789012:"})
package snsbroker
