package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"

	amqpbroker "github.com/postbox-go/postbox/broker/amqpbroker"
	"github.com/postbox-go/postbox/internal/testenv"
)

// relay is a relay started by relayed.
type relay struct {
	tg     target   // its database
	ids    []string // the messages sent before it started
	base   string   // its HTTP address
	stderr *testenv.Buffer
	stop   func() result
}

// relayed sends n messages on topic through the CLI to a fresh SQLite outbox, and starts a relay on it with the
// extra arguments, serving HTTP.
func relayed(t *testing.T, environ func(string) string, topic string, n int, extra ...string) relay {
	t.Helper()
	tg := sqliteTarget(t)
	var ids []string
	if r := run(t, nil, tg.args("migrate", "up")...); r.code != 0 {
		t.Fatal(r.stderr)
	}
	for i := range n {
		r := run(t, nil, tg.args("send", "-t", topic, "--type", "order.created", "-k", fmt.Sprintf("k%d", i), "--data", fmt.Sprintf(`{"n":%d}`, i))...)
		if r.code != 0 {
			t.Fatal(r.stderr)
		}
		ids = append(ids, strings.TrimSpace(r.stdout))
	}
	args := append(tg.args("relay", "--http", "127.0.0.1:0", "--poll-interval", "20ms"), extra...)
	_, stderr, stop := background(t, environ, args...)
	addr := regexp.MustCompile(`addr=(127\.0\.0\.1:\d+)`)
	eventually(t, "the HTTP listener", func() bool { return addr.MatchString(stderr.String()) })
	return relay{tg: tg, ids: ids, base: "http://" + addr.FindStringSubmatch(stderr.String())[1], stderr: stderr, stop: stop}
}

// pending returns the number of pending messages in tg.
func pending(t *testing.T, tg target) int64 {
	t.Helper()
	var s status
	r := run(t, nil, tg.args("status", "--json")...)
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r.stderr)
	}
	return s.Pending
}

// readyz returns the relay's /readyz status code and body.
func readyz(t *testing.T, base string) (int, string) {
	t.Helper()
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func redisAddr() string {
	if a := os.Getenv("POSTBOX_TEST_REDIS"); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

// redisUser connects to the test Redis and creates an ACL user of the test's own with a password, deleted at
// the end of the test, so that the CLI's handling of credentials meets a server that checks them.
func redisUser(t *testing.T) (rdb *redis.Client, user, password string) {
	t.Helper()
	ctx := context.Background()
	rdb = redis.NewClient(&redis.Options{Addr: redisAddr()})
	t.Cleanup(func() { rdb.Close() })
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("Redis is not reachable at %s (start it with `make services`, or set POSTBOX_TEST_REDIS): %v", redisAddr(), err)
	}
	user, password = testenv.Unique("postbox-cli-test"), "R3disPass/w@rd"
	if err := rdb.Do(ctx, "ACL", "SETUSER", user, "reset", "on", ">"+password, "~*", "+@all").Err(); err != nil {
		t.Fatalf("create Redis user %s: %v", user, err)
	}
	t.Cleanup(func() { rdb.Do(context.Background(), "ACL", "DELUSER", user) })
	return rdb, user, password
}

// TestRelayToRedis: the relay logs in with the URL's user and password and adds each message to the stream of its
// topic on a real Redis, with its ID, key and payload, trimmed by maxlen; /readyz pings Redis.
func TestRelayToRedis(t *testing.T) {
	ctx := context.Background()
	rdb, user, password := redisUser(t)
	prefix := testenv.Unique("postbox-cli-test") + fmt.Sprintf(":%d:", time.Now().UnixNano())
	stream := prefix + "orders"
	defer rdb.Del(ctx, stream)

	broker := (&url.URL{Scheme: "redis", User: url.UserPassword(user, password), Host: redisAddr(), Path: "/0",
		RawQuery: "stream_prefix=" + url.QueryEscape(prefix) + "&maxlen=1000&dial_timeout=3s"}).String()
	rl := relayed(t, nil, "orders", 5, "--broker", broker)
	eventually(t, "five entries on "+stream, func() bool { n, _ := rdb.XLen(ctx, stream).Result(); return n == 5 })
	if code, body := readyz(t, rl.base); code != 200 || !strings.Contains(body, `"name":"broker 1 (redis)"`) {
		t.Errorf("/readyz = %d %s", code, body)
	}
	if r := rl.stop(); r.code != 0 {
		t.Fatalf("relay exit %d: %s", r.code, r.stderr)
	}
	entries, err := rdb.XRange(ctx, stream, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range entries {
		if e.Values["ce_id"] != rl.ids[i] || e.Values["ce_partitionkey"] != fmt.Sprintf("k%d", i) ||
			e.Values["ce_type"] != "order.created" || e.Values["ce_data"] != fmt.Sprintf(`{"n":%d}`, i) {
			t.Errorf("entry %d: %v; want ID %s, key k%d", i, e.Values, rl.ids[i], i)
		}
	}
}

// TestRelayToRedisWrongPassword: Redis refusing the password stops the relay at start with Redis's reason,
// never the password itself; the message stays pending.
func TestRelayToRedisWrongPassword(t *testing.T) {
	const password = "N0tTheRedisPassword"
	_, user, _ := redisUser(t)
	r := refusedAtStart(t, password, "redis://"+user+":xxxxx@", "--broker", "redis://"+user+":"+password+"@"+redisAddr()+"/0?stream_prefix=never:")
	mustContain(t, "relay stderr", r.stderr, "WRONGPASS")
}

// refusedAtStart sends one message, starts a relay with args that the broker refuses, and checks that the relay
// exits 1 at start naming the broker (as want, redacted) without printing password, leaving the message pending.
func refusedAtStart(t *testing.T, password, want string, args ...string) result {
	t.Helper()
	tg := sqliteTarget(t)
	if r := run(t, nil, tg.args("migrate", "up")...); r.code != 0 {
		t.Fatal(r.stderr)
	}
	if r := run(t, nil, tg.args("send", "-t", "orders", "--type", "order.created", "--data", "{}")...); r.code != 0 {
		t.Fatal(r.stderr)
	}
	r := run(t, nil, tg.args(append([]string{"relay", "--start-timeout", "8s"}, args...)...)...)
	if r.code != ExitFailure || !strings.Contains(r.stderr, "broker "+want) ||
		!(strings.Contains(r.stderr, "is unreachable") || strings.Contains(r.stderr, "refused the relay")) ||
		strings.Contains(r.stdout+r.stderr, password) {
		t.Fatalf("relay exit %d, want 1 naming %s as unreachable or refusing; output:\n%s%s", r.code, want, r.stdout, r.stderr)
	}
	if n := pending(t, tg); n != 1 {
		t.Fatalf("%d pending; want the message still pending", n)
	}
	return r
}

// TestRelayToRabbitMQ: the relay publishes each message to the topic exchange with publisher confirms, the
// message ID as message-id, to the queue bound for its topic on a real RabbitMQ; /readyz checks the publisher's
// connection.
func TestRelayToRabbitMQ(t *testing.T) {
	ctx := context.Background()
	const server = "amqp://guest:guest@127.0.0.1:5672/"
	conn, err := amqp.Dial(server)
	if err != nil {
		t.Fatalf("RabbitMQ is not reachable at %s (start it with `make services`): %v", RedactURL(server), err)
	}
	defer conn.Close()
	topic := fmt.Sprintf("pbcli%d.orders", time.Now().UnixNano())
	queue := testenv.Unique("postbox-cli-test") + "-" + topic
	if err := amqpbroker.EnsureTopology(ctx, conn, amqpbroker.Topology{Queue: queue, Topics: []string{topic}}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if ch, err := conn.Channel(); err == nil {
			_, _ = ch.QueueDelete(queue, false, false, false)
			ch.Close()
		}
	}()

	rl := relayed(t, nil, topic, 3, "--broker", server+"?heartbeat=10")
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	var got []amqp.Delivery
	eventually(t, "three messages in "+queue, func() bool {
		d, ok, err := ch.Get(queue, true)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			got = append(got, d)
		}
		return len(got) == 3
	})
	if code, body := readyz(t, rl.base); code != 200 || !strings.Contains(body, `"name":"broker 1 (amqp)"`) {
		t.Errorf("/readyz = %d %s", code, body)
	}
	if r := rl.stop(); r.code != 0 {
		t.Fatalf("relay exit %d: %s", r.code, r.stderr)
	}
	for i, d := range got {
		if d.MessageId != rl.ids[i] || d.RoutingKey != topic || d.Headers["cloudEvents_partitionkey"] != fmt.Sprintf("k%d", i) ||
			string(d.Body) != fmt.Sprintf(`{"n":%d}`, i) || d.DeliveryMode != amqp.Persistent {
			t.Errorf("message %d: id %s, routing key %s, headers %v, body %s", i, d.MessageId, d.RoutingKey, d.Headers, d.Body)
		}
	}
}

// TestRelayToRabbitMQWrongPassword: RabbitMQ refusing the password stops the relay at start with RabbitMQ's
// reason and what to check, never the password; RabbitMQ answered, so it is "refused", not "unreachable"
// (issue 35), and no retry waits out --start-timeout.
func TestRelayToRabbitMQWrongPassword(t *testing.T) {
	const password = "N0tGuestsPassword"
	r := refusedAtStart(t, password, "amqp://guest:xxxxx@127.0.0.1:5672/", "--broker", "amqp://guest:"+password+"@127.0.0.1:5672/")
	mustContain(t, "relay stderr", r.stderr, "username or password not allowed", "refused the relay",
		"check the user, password and virtual host in the URL")
	if strings.Contains(r.stderr, "unreachable") || strings.Contains(r.stderr, "--start-timeout") {
		t.Errorf("a refused password is reported as a broker that did not answer:\n%s", r.stderr)
	}
}

// TestRelayToMQTT: the relay publishes each message at QoS 1 to the MQTT topic named by its topic on a real
// Mosquitto, with its ID and key as user properties.
func TestRelayToMQTT(t *testing.T) {
	const server = "mqtt://127.0.0.1:1883"
	topic := fmt.Sprintf("pbcli/%d/orders", time.Now().UnixNano())
	got := make(chan *paho.Publish, 10)
	u, _ := url.Parse(server)
	cm, err := autopaho.NewConnection(context.Background(), autopaho.ClientConfig{ServerUrls: []*url.URL{u}, KeepAlive: 30,
		CleanStartOnInitialConnection: true, ClientConfig: paho.ClientConfig{
			ClientID: testenv.Unique("postbox-cli-test"),
			OnPublishReceived: []func(paho.PublishReceived) (bool, error){
				func(pr paho.PublishReceived) (bool, error) { got <- pr.Packet; return true, nil },
			}}})
	if err != nil {
		t.Fatal(err)
	}
	defer cm.Disconnect(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cm.AwaitConnection(ctx); err != nil {
		t.Fatalf("Mosquitto is not reachable at %s (start it with `make services`): %v", server, err)
	}
	if _, err := cm.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: topic, QoS: 1}}}); err != nil {
		t.Fatal(err)
	}

	rl := relayed(t, nil, topic, 3, "--broker", server+"?client_id="+testenv.Unique("postbox-cli-relay")+"&connect_timeout=5s")
	keys := map[string]string{} // by message ID; messages of different keys may arrive in any order
	for i := range 3 {
		select {
		case p := <-got:
			if p.Topic != topic || p.QoS != 1 {
				t.Errorf("message on topic %s at QoS %d", p.Topic, p.QoS)
			}
			keys[p.Properties.User.Get("id")] = p.Properties.User.Get("partitionkey")
		case <-ctx.Done():
			t.Fatalf("%d of 3 messages arrived; relay stderr:\n%s", i, rl.stderr.String())
		}
	}
	for i, id := range rl.ids {
		if keys[id] != fmt.Sprintf("k%d", i) {
			t.Errorf("message %s arrived with key %q; want k%d (got %v)", id, keys[id], i, keys)
		}
	}
	if code, body := readyz(t, rl.base); code != 200 || !strings.Contains(body, `"name":"broker 1 (mqtt)"`) {
		t.Errorf("/readyz = %d %s", code, body)
	}
	if r := rl.stop(); r.code != 0 {
		t.Fatalf("relay exit %d: %s", r.code, r.stderr)
	}
}
