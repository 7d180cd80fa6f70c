package amqpbroker

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	amqp "github.com/rabbitmq/amqp091-go"
)

// contentType is the user header that travels as the AMQP content-type property, which the CloudEvents AMQP
// binding makes the event's datacontenttype.
const contentType = "content-type"

// prefixColon is the older separator of the CloudEvents AMQP binding. Subscribers read it; publishers write
// broker.PrefixAMQP ("cloudEvents_"), which JMS message selectors can address.
const prefixColon = "cloudEvents:"

// brokerHeaders are headers RabbitMQ adds or acts on. Publishers refuse them, since a user header of that name
// would be misread (or would change routing, as CC and BCC do), and subscribers drop them from received messages.
var brokerHeaders = map[string]bool{
	"CC": true, "BCC": true, // sender-selected distribution
	"x-delivery-count": true, "x-death": true, "x-opt-deaths": true,
	"x-first-death-exchange": true, "x-first-death-queue": true, "x-first-death-reason": true,
	"x-last-death-exchange": true, "x-last-death-queue": true, "x-last-death-reason": true,
	"x-received-from": true, "x-shovelled": true, "x-shovelled-timestamp": true,
}

// publishing maps rec to an AMQP message: CloudEvents attributes and user headers in the headers table, the
// message ID in message-id, the content-type header in content-type, the payload as the body. Its errors are
// ones no retry can fix.
func publishing(ce broker.CloudEvents, rec postbox.Record, transient bool) (amqp.Publishing, error) {
	if len(rec.ID) > maxShortString {
		return amqp.Publishing{}, fmt.Errorf("message ID %q is longer than the %d bytes AMQP allows", rec.ID, maxShortString)
	}
	for name := range rec.Headers {
		switch {
		case brokerHeaders[name]:
			return amqp.Publishing{}, fmt.Errorf("header %q is reserved: RabbitMQ sets or acts on it; rename it", name)
		case len(name) > maxShortString:
			return amqp.Publishing{}, fmt.Errorf("header name %.40q… is longer than the %d bytes AMQP allows", name, maxShortString)
		case len(name) >= len(prefixColon) && strings.EqualFold(name[:len(prefixColon)], prefixColon):
			return amqp.Publishing{}, fmt.Errorf("header %q would be read back as a CloudEvents attribute; rename it", name)
		}
	}
	h, body, err := ce.Encode(rec)
	if err != nil {
		return amqp.Publishing{}, err
	}
	p := amqp.Publishing{
		Headers:      make(amqp.Table, len(h)),
		MessageId:    rec.ID,
		DeliveryMode: amqp.Persistent,
		Body:         body,
	}
	if transient {
		p.DeliveryMode = amqp.Transient
	}
	if !rec.CreatedAt.IsZero() {
		p.Timestamp = rec.CreatedAt // seconds only on the wire; cloudEvents_time has the full time
	}
	for k, v := range h {
		if k == contentType {
			p.ContentType = v
			continue
		}
		p.Headers[k] = v
	}
	if len(p.ContentType) > maxShortString {
		return amqp.Publishing{}, fmt.Errorf("content-type %.40q… is longer than the %d bytes AMQP allows", p.ContentType, maxShortString)
	}
	return p, nil
}

// checkRoutingKey refuses what RabbitMQ cannot route.
func checkRoutingKey(topic, key string) error {
	switch {
	case topic == "":
		return errors.New("topic is empty")
	case len(key) > maxShortString:
		return fmt.Errorf("routing key %.40q… is longer than the %d bytes AMQP allows; shorten the topic or key", key, maxShortString)
	}
	return nil
}

// decode reads a delivery back into an event. Both separators of the CloudEvents AMQP binding are accepted.
func decode(d *amqp.Delivery) (broker.Event, error) {
	h := make(map[string]string, len(d.Headers)+1)
	ce := broker.CloudEvents{Prefix: broker.PrefixAMQP}
	for k, v := range d.Headers {
		if brokerHeaders[k] {
			continue
		}
		s, ok := tableString(v)
		if !ok {
			continue // tables and arrays are not Postbox headers
		}
		if len(k) >= len(prefixColon) && strings.EqualFold(k[:len(prefixColon)], prefixColon) {
			ce.Prefix = prefixColon
		}
		h[k] = s
	}
	if d.ContentType != "" {
		h[contentType] = d.ContentType
	}
	return ce.Decode(h, d.Body)
}

// tableString returns a header value as a string. Other producers may send CloudEvents attributes in native AMQP
// types (a timestamp for time, a number for an extension), which the binding allows.
func tableString(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case []byte:
		return string(v), true
	case time.Time:
		return v.UTC().Format(time.RFC3339Nano), true
	case bool:
		return strconv.FormatBool(v), true
	case int, int8, int16, int32, int64, uint8, uint16, uint32, uint64:
		return fmt.Sprint(v), true
	case float32:
		return strconv.FormatFloat(float64(v), 'g', -1, 32), true
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64), true
	}
	return "", false
}

// attempt returns the delivery count: quorum queues count in x-delivery-count (absent on the first delivery);
// classic queues only flag redeliveries, which leaves the count unknown (0).
func attempt(d *amqp.Delivery) int {
	switch n := d.Headers["x-delivery-count"].(type) {
	case int64:
		return int(n) + 1
	case int32:
		return int(n) + 1
	case int:
		return n + 1
	}
	if d.Redelivered {
		return 0
	}
	return 1
}
