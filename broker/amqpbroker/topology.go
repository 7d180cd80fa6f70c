package amqpbroker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/postbox-go/postbox/broker"
	amqp "github.com/rabbitmq/amqp091-go"
)

// DefaultExchange is the exchange messages are published to when PublisherConfig.Exchange and Topology.Exchange
// are empty: the topic exchange RabbitMQ predeclares in every virtual host.
const DefaultExchange = "amq.topic"

// Queue types for Topology.QueueType (the x-queue-type argument).
const (
	// QueueClassic is RabbitMQ's single-node queue. It does not count deliveries: Delivery.Attempt is 1 on a
	// first delivery and 0 (unknown) on a redelivery.
	QueueClassic = amqp.QueueTypeClassic
	// QueueQuorum is the replicated queue RabbitMQ recommends for data that must not be lost. It counts
	// deliveries (the x-delivery-count header), so Delivery.Attempt is exact, and honours x-delivery-limit.
	QueueQuorum = amqp.QueueTypeQuorum
)

// maxShortString is the longest AMQP 0-9-1 short string: routing keys, header names, the message-id property.
const maxShortString = 255

// Topology is the exchange, queue and bindings one consumer group needs. EnsureTopology declares it.
type Topology struct {
	// Exchange is the topic exchange publishers publish to. It is declared durable unless its name starts with
	// "amq." (RabbitMQ predeclares those and refuses to declare them). Default: DefaultExchange.
	Exchange string
	// Queue is the durable queue the group's subscribers share. Required.
	Queue string
	// QueueType is QueueClassic or QueueQuorum. Default: the server's default, classic unless configured
	// otherwise.
	QueueType string
	// Topics are bound to Queue, each with BindingKey(topic, KeyInRoutingKey). Topic-exchange wildcards work:
	// "orders.*" matches one word, "orders.#" any number. At least one is required.
	Topics []string
	// KeyInRoutingKey must match the publishers' PublisherConfig.KeyInRoutingKey.
	KeyInRoutingKey bool
	// DeadLetterExchange receives the messages subscribers reject (permanent handler failures, messages that
	// are not Postbox CloudEvents). Default: none, and rejected messages are dropped.
	DeadLetterExchange string
	// Args are more queue arguments (x-max-length, x-message-ttl, x-delivery-limit…). They win over the ones
	// QueueType and DeadLetterExchange set.
	Args amqp.Table
}

// EnsureTopology declares t's exchange, queue and bindings on a channel of its own, which it closes. Declaring
// what exists with the same settings changes nothing; declaring it with other settings fails with
// PRECONDITION_FAILED and leaves it as it was. Call it at deploy or start-up time: publishers and subscribers
// never declare anything.
func EnsureTopology(ctx context.Context, conn *amqp.Connection, t Topology) error {
	if conn == nil {
		return errors.New("amqpbroker: EnsureTopology needs a connection; open one with amqp.Dial")
	}
	if t.Queue == "" || len(t.Topics) == 0 {
		return errors.New("amqpbroker: EnsureTopology needs a Queue and at least one topic to bind it to")
	}
	if t.Exchange == "" {
		t.Exchange = DefaultExchange
	}
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("amqpbroker: open a channel to declare topology: %w", err)
	}
	defer ch.Close()
	if !strings.HasPrefix(t.Exchange, "amq.") {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := ch.ExchangeDeclare(t.Exchange, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
			return fmt.Errorf("amqpbroker: declare exchange %q: %w", t.Exchange, err)
		}
	}
	args := amqp.Table{}
	if t.QueueType != "" {
		args[amqp.QueueTypeArg] = t.QueueType
	}
	if t.DeadLetterExchange != "" {
		args["x-dead-letter-exchange"] = t.DeadLetterExchange
	}
	maps.Copy(args, t.Args)
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, err := ch.QueueDeclare(t.Queue, true, false, false, false, args); err != nil {
		return fmt.Errorf("amqpbroker: declare queue %q: %w", t.Queue, err)
	}
	for _, topic := range t.Topics {
		if err := ctx.Err(); err != nil {
			return err
		}
		key := BindingKey(topic, t.KeyInRoutingKey)
		if err := ch.QueueBind(t.Queue, key, t.Exchange, false, nil); err != nil {
			return fmt.Errorf("amqpbroker: bind queue %q to exchange %q with key %q: %w", t.Queue, t.Exchange, key, err)
		}
	}
	return nil
}

// RoutingKey returns the routing key a message with topic and key is published with: the topic, or with
// keyInRoutingKey the topic and KeyToken(key) as one more word.
func RoutingKey(topic, key string, keyInRoutingKey bool) string {
	if !keyInRoutingKey {
		return topic
	}
	return topic + "." + KeyToken(key)
}

// BindingKey returns the binding key that routes every message of topic to a queue: the topic itself, or with
// keyInRoutingKey topic + ".*". To bind a single key instead, bind RoutingKey(topic, key, true).
func BindingKey(topic string, keyInRoutingKey bool) string {
	if !keyInRoutingKey {
		return topic
	}
	return topic + ".*"
}

// KeyToken returns key as one routing-key word; see broker.KeyToken.
func KeyToken(key string) string { return broker.KeyToken(key) }
