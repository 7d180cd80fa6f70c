package cli

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	gapioption "google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/postbox-go/postbox/broker/gcppubsub"
)

// kafkaCluster starts an in-process Kafka cluster (franz-go's kfake) with SASL/PLAIN user relay:relay-pw and
// the topic, for as long as the test.
func kafkaCluster(t *testing.T, topic string) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(2), kfake.SeedTopics(2, topic), kfake.EnableSASL(),
		kfake.Superuser("PLAIN", "relay", "relay-pw"))
	if err != nil {
		t.Fatalf("start the in-process Kafka cluster: %v", err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// TestRelayToKafka: the relay logs in with SASL/PLAIN from the URL and produces each message as a record keyed by
// its key on topic_prefix + topic, with its ID in ce_id; /readyz pings the cluster.
func TestRelayToKafka(t *testing.T) {
	topic := "pbcli.orders"
	addrs := kafkaCluster(t, "prod."+topic)
	rl := relayed(t, nil, topic, 4, "--broker", "kafka://relay:relay-pw@"+strings.Join(addrs, ",")+"?sasl=plain&topic_prefix=prod.&client_id=cli-test")

	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.SASL(plain.Auth{User: "relay", Pass: "relay-pw"}.AsMechanism()),
		kgo.ConsumeTopics("prod."+topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	keys := map[string]string{} // by message ID; two partitions, so no order across keys
	for len(keys) < len(rl.ids) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%d of %d records arrived; relay stderr:\n%s", len(keys), len(rl.ids), rl.stderr.String())
		}
		fs.EachRecord(func(r *kgo.Record) {
			for _, h := range r.Headers {
				if h.Key == "ce_id" {
					keys[string(h.Value)] = string(r.Key)
				}
			}
		})
	}
	for i, id := range rl.ids {
		if keys[id] != fmt.Sprintf("k%d", i) {
			t.Errorf("record of message %s has key %q; want k%d", id, keys[id], i)
		}
	}
	if code, body := readyz(t, rl.base); code != 200 || !strings.Contains(body, `"name":"broker 1 (kafka)"`) {
		t.Errorf("/readyz = %d %s", code, body)
	}
	if r := rl.stop(); r.code != 0 || strings.Contains(r.stderr, "relay-pw") {
		t.Fatalf("relay exit %d: %s", r.code, r.stderr)
	}
}

// TestRelayToKafkaWrongPassword: the cluster refusing the login stops the relay at start, naming the broker,
// never the password; the message stays pending.
func TestRelayToKafkaWrongPassword(t *testing.T) {
	const password = "N0tTheKafkaPassword"
	addrs := kafkaCluster(t, "orders")
	// kfake hangs up on a refused login (EOF) where Kafka answers SASL_AUTHENTICATION_FAILED.
	refusedAtStart(t, password, "kafka://relay:xxxxx@"+addrs[0], "--broker", "kafka://relay:"+password+"@"+addrs[0]+"?delivery_timeout=2s")
}

// TestRelayToPubSub: with PUBSUB_EMULATOR_HOST set, the relay publishes to that emulator (pstest here), each
// message to topic_prefix + topic with its key as ordering key and its ID in ce-id.
func TestRelayToPubSub(t *testing.T) {
	const project = "postbox-cli-test"
	srv := pstest.NewServer()
	defer srv.Close()
	conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c, err := pubsub.NewClient(context.Background(), project, gapioption.WithGRPCConn(conn))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := gcppubsub.EnsureTopic(context.Background(), c, "prod-orders"); err != nil {
		t.Fatal(err)
	}

	rl := relayed(t, env(emulatorEnv, srv.Addr), "orders", 3, "--broker", "pubsub://"+project+"?topic_prefix=prod-&timeout=30s")
	eventually(t, "three messages in the emulator", func() bool { return len(srv.Messages()) == 3 })
	if r := rl.stop(); r.code != 0 {
		t.Fatalf("relay exit %d: %s", r.code, r.stderr)
	}
	keys := map[string]string{}
	for _, m := range srv.Messages() {
		keys[m.Attributes["ce-id"]] = m.OrderingKey
	}
	for i, id := range rl.ids {
		if keys[id] != fmt.Sprintf("k%d", i) {
			t.Errorf("message %s has ordering key %q; want k%d (got %v)", id, keys[id], i, keys)
		}
	}
}
