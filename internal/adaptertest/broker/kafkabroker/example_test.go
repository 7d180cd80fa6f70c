package kafkabroker_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker/debezium"
	kafkabroker "github.com/postbox-go/postbox/broker/kafkabroker"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A publisher in the layout of Debezium's Outbox Event Router: consumers of a Debezium outbox read its records
// unchanged.
func ExampleNewPublisher_debezium() {
	c, err := kfake.NewCluster(kfake.SeedTopics(1, "outbox.event.order"))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("outbox.event.order"))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// docs: debezium publisher
	placement, err := debezium.ParseAdditional("type:header:eventType") // table.fields.additional.placement
	if err != nil {
		log.Fatal(err)
	}
	pub, err := kafkabroker.NewPublisher(cl, &kafkabroker.PublisherConfig{
		Debezium: &debezium.Options{Additional: placement}, // the router's defaults otherwise
	})
	// docs: end
	if err != nil {
		log.Fatal(err)
	}
	rec := postbox.Record{Message: postbox.Message{ID: "4d47e190-0402-4048-bc2c-89dd54343cdc",
		Topic: "order", Key: "1", Type: "OrderCreated", Payload: []byte(`{"id": 1}`)}}
	if err := pub.Publish(ctx, []postbox.Record{rec}); err != nil {
		log.Fatal(err)
	}
	r := cl.PollFetches(ctx).Records()[0]
	fmt.Printf("%s key=%s value=%s\n", r.Topic, r.Key, r.Value)
	for _, h := range r.Headers {
		fmt.Printf("%s=%s\n", h.Key, h.Value)
	}
	// Output:
	// outbox.event.order key="1" value="{\"id\": 1}"
	// id=4d47e190-0402-4048-bc2c-89dd54343cdc
	// eventType=OrderCreated
}
