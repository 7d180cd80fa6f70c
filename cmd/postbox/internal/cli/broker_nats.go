package cli

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	natsbroker "github.com/postbox-go/postbox/broker/natsbroker"
)

func init() { brokerSchemes["nats"] = openNATS }

var natsParams = []string{"stream", "subjects", "key_in_subject", "name"}

// openNATS returns a JetStream publisher for
//
//	nats://[user:pass@]host:4222[,host2:4222][?stream=NAME&subjects=a,b.>&key_in_subject=true&name=CLIENT]
//
// Without stream the streams must exist already (a subject no stream covers cannot be published to). With
// stream and subjects, the relay creates or updates that stream at start-up. The connection retries in the
// background, so a relay started before NATS publishes once NATS is up; /readyz reports it until then.
func openNATS(ctx context.Context, raw string, rt *runtime, o brokerOptions) (*brokerConn, error) {
	servers, query, _ := strings.Cut(raw, "?")
	for _, s := range strings.Split(servers, ",") {
		full := s
		if !strings.Contains(s, "://") {
			full = "nats://" + s // later servers may leave out the scheme
		}
		if u, err := url.Parse(full); err != nil || u.Hostname() == "" {
			return nil, usageErrorf("broker %s: server %q is not host:port or a nats:// URL", RedactURL(raw), RedactURL(s))
		}
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, usageErrorf("broker %s: %v", RedactURL(raw), err)
	}
	for k := range q {
		if !slices.Contains(natsParams, k) {
			return nil, usageErrorf("broker %s: unknown parameter %q; NATS URLs take %s", RedactURL(raw), k, strings.Join(natsParams, ", "))
		}
	}
	keyInSubject := false
	if v := q.Get("key_in_subject"); v != "" {
		if keyInSubject, err = strconv.ParseBool(v); err != nil {
			return nil, usageErrorf("broker %s: key_in_subject=%q is not true or false", RedactURL(raw), v)
		}
	}
	stream, subjects := q.Get("stream"), q.Get("subjects")
	if (stream == "") != (subjects == "") {
		return nil, usageErrorf("broker %s: set stream and subjects together, such as ?stream=ORDERS&subjects=orders.>", RedactURL(raw))
	}
	name := q.Get("name")
	if name == "" {
		name = "postbox-relay"
	}
	nc, err := nats.Connect(servers, nats.Name(name), nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				rt.log.Warn("NATS disconnected; reconnecting", "broker", RedactURL(raw), "err", err)
			}
		}))
	if err != nil {
		return nil, fmt.Errorf("broker %s: %w", RedactURL(raw), err)
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(30*time.Second))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("broker %s: %w", RedactURL(raw), err)
	}
	if stream != "" {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := natsbroker.EnsureStream(sctx, js, jetstream.StreamConfig{Name: stream, Subjects: strings.Split(subjects, ",")})
		cancel()
		if err != nil {
			nc.Close()
			return nil, fmt.Errorf("broker %s: %w", RedactURL(raw), err)
		}
	}
	pub, err := natsbroker.NewPublisher(js, &natsbroker.PublisherConfig{KeyInSubject: keyInSubject, Source: o.source})
	if err != nil {
		nc.Close()
		return nil, usageErrorf("%v", err)
	}
	return &brokerConn{
		name: RedactURL(raw),
		pub:  pub,
		ping: func(ctx context.Context) error {
			if !nc.IsConnected() {
				return fmt.Errorf("not connected (%v)", nc.Status())
			}
			return nc.FlushWithContext(ctx)
		},
		close: func(ctx context.Context) error {
			defer nc.Close()
			if !nc.IsConnected() {
				return nil
			}
			if err := nc.FlushWithContext(ctx); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
				return err
			}
			return nil
		},
	}, nil
}
