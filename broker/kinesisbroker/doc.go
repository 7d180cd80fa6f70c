// Package kinesisbroker publishes Postbox messages to Amazon Kinesis Data Streams with PutRecords, and reads them
// back with GetRecords.
//
// # Wire format
//
// A Kinesis record has no headers, so its data is the message as a CloudEvent in the CloudEvents JSON format
// (structured mode, see Envelope): specversion, id = message ID, source, type, time = enqueue time, subject and
// partitionkey = key, datacontenttype = the content-type header, traceparent and tracestate; the other headers
// as one JSON object in the string extension postboxheaders; the payload as data when it is compact JSON, and
// as data_base64 otherwise. Decode reads it back. A message goes to the stream StreamPrefix + topic, or to
// StreamName.
//
// # Key and order
//
// The partition key is the message key, so a key's messages go to one shard, in publish order: one PutRecords
// call carries at most one record per key, and a record Kinesis failed is retried (or fails, with the later
// records of its key) before the next call. A message without a key is spread by its ID. A key over 256
// characters becomes "sha256-" and its SHA-256 in hex.
//
// # Dedup
//
// Kinesis does not dedup: a record put twice (a relay retrying a batch whose answer it lost) is stored twice;
// the id field carries the message ID, by which the consumer's inbox drops the copy.
//
// # Receiving
//
// NewSubscriber reads every shard of a stream, one record at a time per shard, in order, for broker.Consume. Its
// positions live in memory only: see Subscriber.
//
// # Errors
//
// Records failed for ProvisionedThroughputExceededException or InternalFailure are retried within Publish
// (RetryAttempts, RetryBackoff) and then reported as postbox.Unavailable, like whole calls throttled or failed
// by Kinesis's servers. A record over 1 MiB (data and partition key) is permanent; requests stay within 500
// records and 5 MiB. A missing stream or permission says what to fix (kinesis:PutRecords).
package kinesisbroker
