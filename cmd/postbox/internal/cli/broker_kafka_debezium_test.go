package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// TestRelayToKafkaDebezium: with debezium=PATH of a connector's properties, postbox relay writes the records
// Debezium's Outbox Event Router wrote with that configuration (outbox-event-router.adoc, "Example outbox
// message" and "Emitting messages with additional fields"): topic outbox.event.<topic>, the key and the
// payload as JSON strings (JsonConverter, schemas disabled), the message ID in the id header and the event type
// in the header the placement names; no CloudEvents header.
func TestRelayToKafkaDebezium(t *testing.T) {
	topic := "pbcli.orders"
	addrs := kafkaCluster(t, "outbox.event."+topic)
	connector := filepath.Join(t.TempDir(), "outbox-connector.properties")
	if err := os.WriteFile(connector, []byte(`# the connector's own settings, left alone
connector.class=io.debezium.connector.postgresql.PostgresConnector
slot.name=debezium
transforms=outbox
transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
transforms.outbox.table.fields.additional.placement=type:header:eventType
key.converter=org.apache.kafka.connect.json.JsonConverter
key.converter.schemas.enable=false
value.converter=org.apache.kafka.connect.json.JsonConverter
value.converter.schemas.enable=false
`), 0o600); err != nil {
		t.Fatal(err)
	}
	rl := relayed(t, nil, topic, 3, "--broker", "kafka://relay:relay-pw@"+strings.Join(addrs, ",")+"?sasl=plain&debezium="+connector)

	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.SASL(plain.Auth{User: "relay", Pass: "relay-pw"}.AsMechanism()),
		kgo.ConsumeTopics("outbox.event."+topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := map[string]string{} // by the id header: key, value and headers
	for len(got) < len(rl.ids) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%d of %d records arrived; relay stderr:\n%s", len(got), len(rl.ids), rl.stderr.String())
		}
		fs.EachRecord(func(r *kgo.Record) {
			var hs []string
			id := ""
			for _, h := range r.Headers {
				hs = append(hs, h.Key+"="+string(h.Value))
				if h.Key == "id" {
					id = string(h.Value)
				}
			}
			got[id] = fmt.Sprintf("key=%s value=%s headers=%s", r.Key, r.Value, strings.Join(hs, " "))
		})
	}
	for i, id := range rl.ids {
		want := fmt.Sprintf(`key="k%d" value="{\"n\":%d}" headers=id=%s eventType=order.created`, i, i, id)
		if got[id] != want {
			t.Errorf("message %d: a router consumer reads\n got: %s\nwant: %s", i, got[id], want)
		}
	}
	if r := rl.stop(); r.code != 0 {
		t.Fatalf("relay exit %d: %s", r.code, r.stderr)
	}
}

// TestKafkaDebeziumRefusesSchemas: a connector whose JsonConverter writes schemas (the converter's default) is
// refused at start, saying which setting, rather than relayed in a layout its consumers would not read.
func TestKafkaDebeziumRefusesSchemas(t *testing.T) {
	connector := filepath.Join(t.TempDir(), "connector.json")
	if err := os.WriteFile(connector, []byte(`{"name": "outbox", "config": {
		"transforms": "outbox", "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
		"value.converter": "org.apache.kafka.connect.json.JsonConverter"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := kafkaDebezium(connector); err == nil || !strings.Contains(err.Error(), "value.converter.schemas.enable") {
		t.Fatalf("kafkaDebezium = %v; want an error naming value.converter.schemas.enable", err)
	}
	if _, err := kafkaDebezium(filepath.Join(t.TempDir(), "missing.json")); err == nil || !strings.Contains(err.Error(), "debezium=defaults") {
		t.Fatalf("kafkaDebezium of a missing file = %v; want an error saying what to give", err)
	}
}
