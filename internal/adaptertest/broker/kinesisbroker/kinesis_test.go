package kinesisbroker_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker/brokertest"
	"github.com/postbox-go/postbox/broker/kinesisbroker"
	"github.com/postbox-go/postbox/internal/testenv"
	"go.uber.org/goleak"
)

// emulator is the kinesalite process every test of the package uses, started by TestMain; startErr says why it
// is missing (the tests then fail under CI=true and skip otherwise).
var (
	emulator *testenv.Kinesalite
	startErr error
)

func TestMain(m *testing.M) {
	emulator, startErr = testenv.StartKinesalite()
	code := m.Run()
	if emulator != nil {
		emulator.Stop()
	}
	if code == 0 {
		// The SDK's HTTP client keeps idle connections to the emulator, each with its read and write loops.
		if err := goleak.Find(goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop")); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func client(endpoint string) *kinesis.Client {
	return kinesis.New(kinesis.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "test", SecretAccessKey: "test", Source: "test"}, nil
		})})
}

func server(t *testing.T) *kinesis.Client {
	t.Helper()
	testenv.NeedFauxqs(t, startErr)
	return client(emulator.Endpoint)
}

// stream creates a stream of shards shards for topic and waits until it is active.
func stream(t *testing.T, c *kinesis.Client, name string, shards int32) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(shards)}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "stream "+name+" active", func() bool {
		out, err := c.DescribeStream(ctx, &kinesis.DescribeStreamInput{StreamName: aws.String(name)})
		return err == nil && out.StreamDescription.StreamStatus == types.StreamStatusActive
	})
}

// readAll reads every record of the stream, shard by shard, in each shard's order.
func readAll(t *testing.T, c *kinesis.Client, name string) []types.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	shards, err := c.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	var out []types.Record
	for _, sh := range shards.Shards {
		it, err := c.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(name), ShardId: sh.ShardId,
			ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		iter := it.ShardIterator
		for iter != nil {
			got, err := c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, got.Records...)
			if len(got.Records) == 0 || aws.ToInt64(got.MillisBehindLatest) == 0 {
				break
			}
			iter = got.NextShardIterator
		}
	}
	return out
}

// TestPublishReadBack: every message published arrives once, as it was sent (ID, type, key, headers, JSON,
// binary and empty payloads), with its key as partition key, and the messages of each key in publish order.
func TestPublishReadBack(t *testing.T) {
	c := server(t)
	topic := brokertest.Topic()
	stream(t, c, "pfx-"+topic, 3)
	pub, err := kinesisbroker.NewPublisher(c, &kinesisbroker.PublisherConfig{StreamPrefix: "pfx-"})
	if err != nil {
		t.Fatal(err)
	}
	recs := brokertest.Records(topic, 60, 4)
	for i := 0; i < len(recs); i += 25 {
		if err := pub.Publish(context.Background(), recs[i:min(i+25, len(recs))]); err != nil {
			t.Fatal(err)
		}
	}
	byID := map[string]postbox.Record{}
	for _, r := range recs {
		byID[r.ID] = r
	}
	seen := map[string]bool{}
	lastIndex := map[string]int{}
	index := map[string]int{}
	for i, r := range recs {
		index[r.ID] = i
	}
	for _, kr := range readAll(t, c, "pfx-"+topic) {
		e, err := kinesisbroker.Decode(kr.Data)
		if err != nil {
			t.Fatal(err)
		}
		want, ok := byID[e.Message.ID]
		if !ok || seen[e.Message.ID] {
			t.Errorf("message %s read twice or never published", e.Message.ID)
			continue
		}
		seen[e.Message.ID] = true
		if e.Message.Type != want.Type || e.Message.Key != want.Key || !bytes.Equal(e.Message.Payload, want.Payload) || e.Source != "postbox" {
			t.Errorf("message %s: got type %q key %q payload %q source %q; want %q %q %q", want.ID, e.Message.Type, e.Message.Key,
				e.Message.Payload, e.Source, want.Type, want.Key, want.Payload)
		}
		for k, v := range want.Headers {
			if e.Message.Headers[k] != v {
				t.Errorf("message %s: header %q is %q; want %q", want.ID, k, e.Message.Headers[k], v)
			}
		}
		if aws.ToString(kr.PartitionKey) != want.Key {
			t.Errorf("message %s: partition key %q; want the key %q", want.ID, aws.ToString(kr.PartitionKey), want.Key)
		}
		if last, ok := lastIndex[want.Key]; ok && index[want.ID] < last {
			t.Errorf("key %q: message %d read after message %d; want publish order", want.Key, index[want.ID], last)
		}
		lastIndex[want.Key] = index[want.ID]
	}
	if len(seen) != len(recs) {
		t.Errorf("read %d of %d messages", len(seen), len(recs))
	}
}

// counter counts the PutRecords requests that go through it.
type counter struct {
	n atomic.Int32
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get("X-Amz-Target") == "Kinesis_20131202.PutRecords" {
		c.n.Add(1)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestRequestLimit: records that together exceed the 5 MiB of one PutRecords call go in several calls (kinesalite
// does not enforce that limit, so the test counts the calls), all accepted; a record over 1 MiB fails as
// permanent and the others go through.
func TestRequestLimit(t *testing.T) {
	c := server(t)
	topic := brokertest.Topic()
	stream(t, c, topic, 1)
	calls := &counter{}
	counted := kinesis.New(c.Options(), func(o *kinesis.Options) { o.HTTPClient = &http.Client{Transport: calls} })
	pub, err := kinesisbroker.NewPublisher(counted, nil)
	if err != nil {
		t.Fatal(err)
	}
	recs := brokertest.Records(topic, 7, 7)
	for i := range recs {
		recs[i].Payload = bytes.Repeat([]byte{'a' + byte(i)}, 700*1024) // 0.9 MiB each as base64: six make more than 5 MiB
		recs[i].Headers["content-type"] = "text/plain"
	}
	recs[6].Payload = bytes.Repeat([]byte{'z'}, kinesisbroker.MaxRecordBytes)
	err = pub.Publish(context.Background(), recs)
	var be *postbox.BatchError
	if !errors.As(err, &be) || !postbox.IsPermanent(be.Errs[6]) {
		t.Fatalf("Publish: %v; want a BatchError with the last, oversized, message permanent", err)
	}
	for i, e := range be.Errs[:6] {
		if e != nil {
			t.Errorf("message %d: %v; want it published", i, e)
		}
	}
	if n := calls.n.Load(); n < 2 {
		t.Errorf("%d PutRecords call(s) for 5.6 MiB of records; want at least 2, none over 5 MiB", n)
	}
	if n := len(readAll(t, c, topic)); n != 6 {
		t.Errorf("the stream holds %d records; want 6", n)
	}
}

// TestMissingStream: a topic without a stream fails its messages, retryably, with an error that says to create
// the stream.
func TestMissingStream(t *testing.T) {
	c := server(t)
	pub, err := kinesisbroker.NewPublisher(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = pub.Publish(context.Background(), brokertest.Records(brokertest.Topic(), 2, 0))
	var be *postbox.BatchError
	if !errors.As(err, &be) || be.Errs[0] == nil || postbox.IsPermanent(be.Errs[0]) || !strings.Contains(be.Errs[0].Error(), "create it") {
		t.Fatalf("Publish: %v; want retryable per-message errors saying to create the stream", err)
	}
}

// TestUnreachable: a publisher for an address where nothing listens fails retryably, and after Close with
// ErrClosed.
func TestUnreachable(t *testing.T) {
	pub, err := kinesisbroker.NewPublisher(client("http://127.0.0.1:1"), &kinesisbroker.PublisherConfig{RetryBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = pub.Publish(ctx, brokertest.Records(brokertest.Topic(), 1, 0))
	if err == nil || postbox.IsPermanent(err) || !postbox.IsUnavailable(err) {
		t.Errorf("Publish to nothing: %v; want a retryable error that counts as unavailable", err)
	}
	_ = pub.Close()
	if err := pub.Publish(ctx, brokertest.Records("t", 1, 0)); !errors.Is(err, kinesisbroker.ErrClosed) {
		t.Errorf("Publish after Close: %v; want ErrClosed", err)
	}
}
