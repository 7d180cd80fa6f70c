// Package mqttbroker publishes Postbox messages to an MQTT 5 server and receives them through a persistent
// session, with github.com/eclipse/paho.golang (the autopaho connection manager).
//
// # Wire format
//
// A message is published at QoS 1 to the topic named by its topic. Its CloudEvents attributes follow the
// CloudEvents MQTT binding in binary mode: user properties named like the attributes, with no prefix
// (specversion, id = the message ID, source, type, time, subject and partitionkey = the key); user headers are
// user properties too, the content-type header is the Content Type property, and the payload is the payload.
//
// # Guarantees
//
// MQTT promises less than a log or a queue broker, and this package says exactly what:
//
//   - QoS 1 is at least once. Publish returns nil for a message only after its PUBACK. A message no
//     subscription matches is acknowledged by the server with "no matching subscribers" and dropped, so Publish
//     fails it (retryably) unless PublisherConfig.AllowNoSubscribers is set. Subscriptions belong to sessions:
//     make a subscriber's session (Subscriber.EnsureSession) before publishing to it.
//   - MQTT does not deduplicate. The message ID travels in the id user property for the consumer's inbox.
//   - Order holds per topic, for the messages one publisher connection sent, to one subscriber session. Publish
//     sends the records of one topic and key one after the other; a Subscriber handles one key in one lane.
//     Shared subscriptions spread a topic's messages over the group, and redeliveries may come after newer
//     messages.
//   - Acknowledgements are positive only and go in arrival order. A nack cannot ask for one message again: the
//     subscriber reconnects and resumes its session (clean start false), and the server then sends every
//     unacknowledged message again, with the DUP flag.
//   - A session keeps its subscriptions and queued messages for SessionExpiry after a disconnection. With a
//     shared subscription the server gives each message to one member's session, connected or not; it stays
//     there until that member (the same ClientID) comes back, and is lost if the session expires or is deleted.
//     Servers also bound what they queue per session (Mosquitto: max_queued_messages, 1000 by default) and drop
//     what is over.
//
// # Setup
//
//	pub, err := mqttbroker.NewPublisher(&mqttbroker.PublisherConfig{ConnConfig: mqttbroker.ConnConfig{URL: url}})
//	defer pub.Close()
//	relay, err := postbox.NewRelay(client, pub, nil)
//
//	sub, err := mqttbroker.NewSubscriber(&mqttbroker.SubscriberConfig{ConnConfig: mqttbroker.ConnConfig{URL: url},
//		ClientID: "billing-1", Group: "billing", Topics: []string{"orders"}})
//	err = sub.EnsureSession(ctx) // at deploy time: the server keeps messages for the session from now on
//	err = broker.Consume(ctx, sub, consumer, handler, nil) // blocks until ctx is cancelled
package mqttbroker
