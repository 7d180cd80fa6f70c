package broker_test

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
)

func ExampleCloudEvents() {
	rec := postbox.Record{
		Message: postbox.Message{ID: "01890a5d-ac96-774b-bcce-b302099a8057", Topic: "orders", Key: "order-42",
			Type: "order.created", Payload: []byte(`{"total":42}`),
			Headers: map[string]string{"content-type": "application/json"}},
		CreatedAt: time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC),
	}
	kafka := broker.CloudEvents{Prefix: broker.PrefixKafka, Source: "/billing"}
	headers, body, err := kafka.Encode(rec)
	if err != nil {
		panic(err)
	}
	for _, name := range slices.Sorted(maps.Keys(headers)) {
		fmt.Printf("%s: %s\n", name, headers[name])
	}
	e, _ := kafka.Decode(headers, body)
	fmt.Println(e.Message.ID == rec.ID, e.Message.Key, string(e.Message.Payload))
	// Output:
	// ce_id: 01890a5d-ac96-774b-bcce-b302099a8057
	// ce_partitionkey: order-42
	// ce_source: /billing
	// ce_specversion: 1.0
	// ce_subject: order-42
	// ce_time: 2024-05-06T07:08:09Z
	// ce_type: order.created
	// content-type: application/json
	// true order-42 {"total":42}
}
