module github.com/postbox-go/postbox/broker/amqpbroker

go 1.26.0

require (
	github.com/postbox-go/postbox v0.1.0
	github.com/rabbitmq/amqp091-go v1.16.0
)
