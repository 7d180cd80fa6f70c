package cli

import (
	"context"
	"net/url"
	"strings"

	"github.com/postbox-go/postbox/broker/webhook"
)

func init() {
	brokerSchemes["http"] = openWebhook
	brokerSchemes["https"] = openWebhook
}

// openWebhook returns a publisher that POSTs each message to the URL, signed with --webhook-secret (Standard
// Webhooks) in the CloudEvents HTTP binary mode. A URL with {topic} sends each topic to its own endpoint:
// https://hooks.example/in/{topic}; the publisher escapes the topic for its place in the URL.
func openWebhook(_ context.Context, raw string, rt *runtime, o brokerOptions) (*brokerConn, error) {
	if o.webhookSecret == "" {
		return nil, usageErrorf("broker %s: a webhook needs --webhook-secret (or POSTBOX_WEBHOOK_SECRET), which receivers use to verify each request", RedactURL(raw))
	}
	if _, err := webhook.ParseSecret(o.webhookSecret); err != nil {
		return nil, usageErrorf("%s: %v", o.webhookSecretFrom, err)
	}
	cfg := &webhook.PublisherConfig{URL: raw, Secret: o.webhookSecret, Source: o.source, Logger: rt.log}
	u, err := url.Parse(strings.ReplaceAll(raw, webhook.TopicPlaceholder, "t"))
	if err != nil {
		return nil, usageErrorf("broker %s: %v", RedactURL(raw), err)
	}
	if u.Host == "" {
		return nil, usageErrorf("broker %s: the URL has no host; write %s://host/path", RedactURL(raw), u.Scheme)
	}
	if strings.ContainsAny(strings.ReplaceAll(raw, webhook.TopicPlaceholder, ""), "{}") {
		return nil, usageErrorf("broker %s: a brace that is not part of %s; that is the only placeholder", RedactURL(raw), webhook.TopicPlaceholder)
	}
	pub, err := webhook.NewPublisher(cfg)
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	return &brokerConn{name: RedactURL(raw), pub: pub}, nil
}
