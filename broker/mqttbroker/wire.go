package mqttbroker

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/eclipse/paho.golang/paho"
	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
)

// contentType is the user header that travels as the MQTT 5 Content Type property, which the CloudEvents MQTT
// binding makes the event's datacontenttype.
const contentType = "content-type"

// ce is the CloudEvents MQTT binding: attributes are user properties named like the attributes, no prefix.
var ce = broker.CloudEvents{Prefix: broker.PrefixMQTT}

// maxString is the longest MQTT UTF-8 string: topic names, user property names and values.
const maxString = 65535

// message maps rec to a QoS 1 PUBLISH: CloudEvents attributes and user headers as user properties, the
// content-type header as the Content Type property, the payload as the payload. Its errors are ones no retry can
// fix.
func message(source string, rec postbox.Record) (*paho.Publish, error) {
	if err := checkTopic(rec.Topic); err != nil {
		return nil, err
	}
	enc := ce
	enc.Source = source
	h, body, err := enc.Encode(rec)
	if err != nil {
		return nil, err
	}
	props := &paho.PublishProperties{User: make(paho.UserProperties, 0, len(h))}
	for k, v := range h {
		if err := checkString("header name", k); err != nil {
			return nil, err
		}
		if err := checkString(fmt.Sprintf("header %q", k), v); err != nil {
			return nil, err
		}
		if k == contentType {
			props.ContentType = v
			continue
		}
		props.User = append(props.User, paho.UserProperty{Key: k, Value: v})
	}
	return &paho.Publish{QoS: 1, Topic: rec.Topic, Properties: props, Payload: body}, nil
}

// checkTopic refuses what is not an MQTT topic name a client may publish to.
func checkTopic(topic string) error {
	switch {
	case topic == "":
		return errors.New("topic is empty")
	case strings.ContainsAny(topic, "+#"):
		return fmt.Errorf("topic %q is not an MQTT topic name: '+' and '#' are wildcards, for subscriptions only", topic)
	case strings.HasPrefix(topic, "$"):
		return fmt.Errorf("topic %q starts with '$', which MQTT reserves for the server", topic)
	}
	return checkString("topic", topic)
}

// checkString refuses what is not an MQTT UTF-8 string; a server disconnects a client that sends one.
func checkString(what, s string) error {
	switch {
	case len(s) > maxString:
		return fmt.Errorf("%s is %d bytes; MQTT allows %d", what, len(s), maxString)
	case !utf8.ValidString(s):
		return fmt.Errorf("%s %q is not valid UTF-8, which MQTT requires", what, s)
	case strings.ContainsRune(s, 0):
		return fmt.Errorf("%s %q contains U+0000, which MQTT forbids", what, s)
	}
	return nil
}

// decode reads a received PUBLISH back into an event.
func decode(p *paho.Publish) (broker.Event, error) {
	var h map[string]string
	if p.Properties != nil {
		h = make(map[string]string, len(p.Properties.User)+1)
		for _, u := range p.Properties.User {
			if _, dup := h[u.Key]; !dup { // MQTT allows repeated names; the first one counts
				h[u.Key] = u.Value
			}
		}
		if p.Properties.ContentType != "" {
			h[contentType] = p.Properties.ContentType
		}
	}
	e, err := ce.Decode(h, p.Payload)
	if err != nil {
		return broker.Event{}, err
	}
	e.Message.Topic = p.Topic
	return e, nil
}

// SharedFilter returns the filter of a shared subscription: "$share/" + group + "/" + filter. The server gives
// each message matching filter to one of the sessions subscribed with the same group.
func SharedFilter(group, filter string) string {
	return "$share/" + group + "/" + filter
}

// checkFilter refuses what is not an MQTT topic filter.
func checkFilter(filter string) error {
	if filter == "" {
		return errors.New("a topic filter is empty")
	}
	for i, level := range strings.Split(filter, "/") {
		switch {
		case strings.Contains(level, "#") && (level != "#" || i != strings.Count(filter, "/")):
			return fmt.Errorf("topic filter %q: '#' must be a whole level, and the last", filter)
		case strings.Contains(level, "+") && level != "+":
			return fmt.Errorf("topic filter %q: '+' must be a whole level", filter)
		}
	}
	return checkString("topic filter", filter)
}
