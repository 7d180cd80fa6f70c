package sqsbroker

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	"github.com/postbox-go/postbox/broker/internal/awswire"
)

// Prefix is the message-attribute name prefix of the CloudEvents attributes (the HTTP binding's).
const Prefix = awswire.Prefix

// Limits SQS puts on a message.
const (
	// MaxAttributes is how many message attributes SQS allows on a message.
	MaxAttributes = awswire.MaxAttributes
	// MaxBatchEntries is how many messages one SendMessageBatch call takes.
	MaxBatchEntries = 10
	// DefaultMaxMessageBytes is PublisherConfig.MaxMessageBytes's default: 256 KiB, the size limit of a message
	// (body and attributes) and of a whole SendMessageBatch call that every queue accepts.
	DefaultMaxMessageBytes = 256 * 1024
	// MaxMessageBytesLimit is the largest MaxMessageBytes: 1 MiB, SQS's ceiling for a queue's
	// MaximumMessageSize.
	MaxMessageBytesLimit = 1024 * 1024
	// MaxGroupIDLen is the longest MessageGroupId and MessageDeduplicationId.
	MaxGroupIDLen = awswire.MaxGroupIDLen
)

// Attribute names of the adapter's own, beside the CloudEvents ones.
const (
	// AttrHeaders holds, as a JSON object, the headers that did not fit in MaxAttributes or whose name or value
	// SQS does not allow as a message attribute.
	AttrHeaders = awswire.AttrHeaders
	// AttrBody says how the body carries the payload when it is not the payload itself: "base64" (a payload that
	// is not text SQS accepts) or "empty" (an empty payload; SQS refuses an empty body).
	AttrBody = awswire.AttrBody
)

// DefaultGroup is the MessageGroupId of a message without a key on a FIFO queue: such messages are all in one
// group, delivered in publish order with each other.
const DefaultGroup = "postbox"

// wireMessage is a record as SQS carries it.
type wireMessage struct {
	body  string
	attrs map[string]types.MessageAttributeValue
	size  int // what SQS counts against its size limit
}

// encode maps rec to an SQS body and message attributes (see awswire.Encode).
func encode(ce broker.CloudEvents, rec postbox.Record) (wireMessage, error) {
	m, err := awswire.Encode(ce, rec)
	if err != nil {
		return wireMessage{}, fmt.Errorf("sqsbroker: %w", err)
	}
	out := wireMessage{body: m.Body, size: m.Size, attrs: make(map[string]types.MessageAttributeValue, len(m.Attrs))}
	for n, v := range m.Attrs {
		out.attrs[n] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	return out, nil
}

// decode is encode's inverse. Attributes that are not strings (Binary and Number ones of another producer) are
// left out.
func decode(ce broker.CloudEvents, body *string, attrs map[string]types.MessageAttributeValue) (broker.Event, error) {
	h := make(map[string]string, len(attrs))
	for n, v := range attrs {
		if v.StringValue != nil {
			h[n] = *v.StringValue
		}
	}
	return awswire.Decode(ce, aws.ToString(body), h)
}

func groupID(key, def string) string { return awswire.GroupID(key, def) }

func validGroupID(s string) bool { return awswire.ValidGroupID(s) }
