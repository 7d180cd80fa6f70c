package kafkabroker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker/debezium"
	kafkabroker "github.com/postbox-go/postbox/broker/kafkabroker"
	"github.com/postbox-go/postbox/internal/testenv/pgxenv"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDebeziumLayoutThroughTheRelay: messages enqueued in PostgreSQL, relayed by postbox.Relay through a
// publisher in PublisherConfig.Debezium's mode, read from Kafka (kfake) by a consumer that knows only the
// Outbox Event Router's layout. The expected bytes are written out by hand from Debezium's documentation
// (outbox-event-router.adoc: "Example outbox message", "Emitting messages with additional fields",
// route.tombstone.on.empty.payload, table.field.event.timestamp), with JsonConverter (schemas.enable=false) for
// key and value, so that they do not come from the code under test.
func TestDebeziumLayoutThroughTheRelay(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pbx := pgxenv.Client(t, "postbox_test_kafka")
	brokers := cluster(t)
	cl := client(t, brokers)
	for _, topic := range []string{"outbox.event.order", "outbox.event.customer"} {
		ensureTopic(t, cl, topic)
	}
	placement, err := debezium.ParseAdditional("type:header:eventType,traceparent:header")
	if err != nil {
		t.Fatal(err)
	}
	pub, err := kafkabroker.NewPublisher(cl, &kafkabroker.PublisherConfig{Logger: quietLogger(), Debezium: &debezium.Options{
		Additional: placement, AdditionalMissingIgnore: true, FieldEventTimestamp: "timestamp", TombstoneOnEmptyPayload: true}})
	if err != nil {
		t.Fatal(err)
	}

	const trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	msgs := []postbox.Message{
		{Topic: "order", Key: "1", Type: "OrderCreated", Payload: []byte(`{"id": 1}`), Headers: map[string]string{"traceparent": trace}},
		{Topic: "order", Key: "1", Type: "OrderShipped", Payload: []byte(`{"id": 1, "shipped": true}`)},
		{Topic: "customer", Type: "CustomerCreated", Payload: []byte(`say "hi"`)},
		{Topic: "order", Key: "2", Type: "OrderDeleted"},
	}
	before := time.Now().Truncate(time.Millisecond)
	if err := pbx.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error { return pbx.EnqueueBatch(ctx, tx, msgs) }); err != nil {
		t.Fatal(err)
	}
	after := time.Now()

	relay, err := postbox.NewRelay(pbx, pub, &postbox.RelayConfig{PollInterval: 20 * time.Millisecond, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- relay.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("relay.Run: %v", err)
		}
	}()

	type want struct {
		topic, key, value string // "<null>" for a null key or value; a keyless message's key is JsonConverter's null
		headers           string
	}
	wants := []want{
		{"outbox.event.order", `"1"`, `"{\"id\": 1}"`, fmt.Sprintf("id=%s eventType=OrderCreated traceparent=%s", msgs[0].ID, trace)},
		{"outbox.event.order", `"1"`, `"{\"id\": 1, \"shipped\": true}"`, fmt.Sprintf("id=%s eventType=OrderShipped", msgs[1].ID)},
		{"outbox.event.customer", "null", `"say \"hi\""`, fmt.Sprintf("id=%s eventType=CustomerCreated", msgs[2].ID)},
		{"outbox.event.order", `"2"`, "<null>", fmt.Sprintf("id=%s eventType=OrderDeleted", msgs[3].ID)}, // a tombstone
	}
	orders := readAll(t, brokers, "outbox.event.order", 3)
	customers := readAll(t, brokers, "outbox.event.customer", 1)
	got := map[string]*kgo.Record{}
	for _, r := range append(orders, customers...) {
		id, _ := header(r, "id")
		got[id] = r
	}
	orNull := func(b []byte) string {
		if b == nil {
			return "<null>"
		}
		return string(b)
	}
	for i, w := range wants {
		r, ok := got[msgs[i].ID]
		if !ok {
			t.Errorf("no record has the id header %s of message %d (%s)", msgs[i].ID, i, msgs[i].Type)
			continue
		}
		var hs []string
		for _, h := range r.Headers {
			hs = append(hs, h.Key+"="+string(h.Value))
		}
		g := want{r.Topic, orNull(r.Key), orNull(r.Value), strings.Join(hs, " ")}
		if g != w {
			t.Errorf("message %d (%s): a router consumer reads\n got: %+v\nwant: %+v", i, msgs[i].Type, g, w)
		}
		if r.Timestamp.Before(before) || r.Timestamp.After(after) {
			t.Errorf("message %d: record timestamp %v is not its enqueue time (table.field.event.timestamp=timestamp), between %v and %v",
				i, r.Timestamp, before, after)
		}
	}
	// Per-key order: one worker publishes key "1"'s two events in one batch, in enqueue order, and the record
	// key keeps them on one partition.
	var seq []string
	for _, r := range orders {
		if string(r.Key) == `"1"` {
			et, _ := header(r, "eventType")
			seq = append(seq, et)
		}
	}
	if strings.Join(seq, ",") != "OrderCreated,OrderShipped" {
		t.Errorf("key 1's events were read in the order %v; want OrderCreated,OrderShipped", seq)
	}
}

// TestDebeziumPublisherConfigErrors: what the Debezium mode cannot honour is refused by NewPublisher.
func TestDebeziumPublisherConfigErrors(t *testing.T) {
	cl := client(t, cluster(t))
	for name, o := range map[string]debezium.Options{
		"partition placement": {Additional: []debezium.Additional{{Field: "p", Placement: debezium.PlacementPartition}}},
		"bad regex":           {RouteTopicRegex: "[a-"},
		"timestamp placed":    {Additional: []debezium.Additional{{Field: "timestamp", Placement: debezium.PlacementHeader}}},
	} {
		_, err := kafkabroker.NewPublisher(cl, &kafkabroker.PublisherConfig{Debezium: &o})
		if !errors.Is(err, postbox.ErrInvalidConfig) || !strings.Contains(err.Error(), "Debezium") {
			t.Errorf("%s: NewPublisher error = %v; want postbox.ErrInvalidConfig naming the Debezium field", name, err)
		}
	}
}
