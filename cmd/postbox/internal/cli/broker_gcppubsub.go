package cli

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"cloud.google.com/go/pubsub/v2"
	vkit "cloud.google.com/go/pubsub/v2/apiv1"
	"github.com/googleapis/gax-go/v2"
	gapioption "google.golang.org/api/option"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/postbox-go/postbox/broker/gcppubsub"
)

func init() { brokerSchemes["pubsub"] = openPubSub }

// pubsubParams are the query parameters of a pubsub:// URL.
var pubsubParams = []string{"topic_prefix", "timeout", "credentials_file", reconnectParam}

// emulatorEnv names the Pub/Sub emulator to use instead of Google Cloud, as Google's own tools read it.
const emulatorEnv = "PUBSUB_EMULATOR_HOST"

// openPubSub returns a Google Cloud Pub/Sub publisher for
//
//	pubsub://PROJECT[?topic_prefix=P&timeout=D&credentials_file=PATH&reconnect_max=D]
//
// Each message is published to topic P + topic of PROJECT, with its key as ordering key. The topics must exist.
// Credentials are Google's Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS, the metadata server),
// or the service account key in credentials_file. With PUBSUB_EMULATOR_HOST=host:port set, it publishes to that
// emulator instead, without credentials. The gRPC connection and the client's retries of a failed publish back
// off at the relay's error-backoff pace, capped by reconnect_max (default --error-backoff-max), instead of the
// client's defaults (up to 2 minutes between connection attempts, 60 s between publish retries).
func openPubSub(ctx context.Context, raw string, rt *runtime, o brokerOptions) (*brokerConn, error) {
	fail := brokerFail(raw)
	u, err := url.Parse(raw)
	if err != nil {
		return fail("not a URL (%v); write pubsub://PROJECT", scrubURLError(err))
	}
	project := u.Host
	if project == "" || u.User != nil || (u.Path != "" && u.Path != "/") || strings.Contains(project, ":") {
		return fail("write pubsub://PROJECT, with the Google Cloud project ID as the host and nothing else before the query")
	}
	q := u.Query()
	for k := range q {
		if !slices.Contains(pubsubParams, k) {
			return fail("unknown parameter %q; Pub/Sub URLs take %s", k, strings.Join(pubsubParams, ", "))
		}
	}
	cfg := gcppubsub.PublisherConfig{TopicPrefix: q.Get("topic_prefix"), Source: o.source}
	if v := q.Get("timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fail("timeout=%q: write a positive duration, such as timeout=60s", v)
		}
		settings := pubsub.DefaultPublishSettings
		settings.Timeout = d
		cfg.Settings = &settings
	}
	pace, err := o.reconnect.fromURL(q)
	if err != nil {
		return fail("%v", err)
	}
	opts := []gapioption.ClientOption{gapioption.WithGRPCDialOption(grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           grpcbackoff.Config{BaseDelay: pace.base, Multiplier: 2, Jitter: 0.5, MaxDelay: pace.max},
		MinConnectTimeout: 20 * time.Second, // gRPC's default
	}))}
	if emu := rt.env(emulatorEnv); emu != "" {
		opts = append(opts, gapioption.WithEndpoint(emu), gapioption.WithoutAuthentication(),
			gapioption.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	} else if f := q.Get("credentials_file"); f != "" {
		opts = append(opts, gapioption.WithAuthCredentialsFile(gapioption.ServiceAccount, f))
	}
	c, err := pubsub.NewClientWithConfig(ctx, project, pubsubClientConfig(pace), opts...)
	if err != nil {
		return nil, fmt.Errorf("broker %s: %w", RedactURL(raw), err)
	}
	pub, err := gcppubsub.NewPublisher(c, &cfg)
	if err != nil {
		c.Close()
		return fail("%v", err)
	}
	return &brokerConn{
		name: RedactURL(raw),
		pub:  pub,
		// No ping: every call that would prove the connection needs a permission beyond publishing.
		close: func(context.Context) error { return errors.Join(pub.Close(), c.Close()) },
	}, nil
}

// pubsubClientConfig retries a failed publish on the codes the client's default retries it on (its default
// Publish call options, apiv1), at pace instead of from 100 ms by a factor of 4 up to 60 s.
func pubsubClientConfig(pace reconnectPace) *pubsub.ClientConfig {
	retryable := []codes.Code{codes.Aborted, codes.Canceled, codes.Internal, codes.ResourceExhausted, codes.Unknown,
		codes.Unavailable, codes.DeadlineExceeded}
	return &pubsub.ClientConfig{TopicAdminCallOptions: &vkit.TopicAdminCallOptions{Publish: []gax.CallOption{
		gax.WithTimeout(60 * time.Second),
		gax.WithRetry(func() gax.Retryer {
			return gax.OnCodes(retryable, gax.Backoff{Initial: pace.base, Max: pace.max, Multiplier: 2})
		}),
	}}}
}
