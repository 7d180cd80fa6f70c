package debezium_test

import (
	"fmt"

	"github.com/postbox-go/postbox/broker/debezium"
)

// The record Debezium's router emits for a row of the documented outbox table, with its defaults and the
// event type placed in a header.
func ExampleRouter_Route() {
	placement, err := debezium.ParseAdditional("type:header:eventType")
	if err != nil {
		panic(err)
	}
	r, err := debezium.New(debezium.Options{Additional: placement})
	if err != nil {
		panic(err)
	}
	m, err := r.Route(debezium.Row{
		"id":            "4d47e190-0402-4048-bc2c-89dd54343cdc",
		"aggregatetype": "order",
		"aggregateid":   "1",
		"type":          "OrderCreated",
		"payload":       `{"id": 1}`,
	})
	if err != nil {
		panic(err)
	}
	fmt.Printf("topic %s, key %s, value %s\n", m.Topic, m.Key, m.Value)
	for _, h := range m.Headers {
		fmt.Printf("header %s=%s\n", h.Key, h.Value)
	}
	// Output:
	// topic outbox.event.order, key "1", value "{\"id\": 1}"
	// header id=4d47e190-0402-4048-bc2c-89dd54343cdc
	// header eventType=OrderCreated
}
