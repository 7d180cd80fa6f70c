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

// topicPlaceholder in a webhook URL is replaced by each message's topic, path-escaped.
const topicPlaceholder = "{topic}"

// openWebhook returns a publisher that POSTs each message to the URL, signed with --webhook-secret (Standard
// Webhooks) in the CloudEvents HTTP binary mode. A URL with {topic} sends each topic to its own endpoint:
// https://hooks.example/in/{topic}.
func openWebhook(_ context.Context, raw string, _ *runtime, o brokerOptions) (*brokerConn, error) {
	if o.webhookSecret == "" {
		return nil, usageErrorf("broker %s: a webhook needs --webhook-secret (or POSTBOX_WEBHOOK_SECRET), which receivers use to verify each request", RedactURL(raw))
	}
	cfg := webhook.Config{Secret: []byte(o.webhookSecret), Source: o.source}
	if strings.Contains(raw, topicPlaceholder) {
		cfg.Endpoint = func(topic string) string { return strings.ReplaceAll(raw, topicPlaceholder, url.PathEscape(topic)) }
	} else {
		cfg.URL = raw
	}
	u, err := url.Parse(strings.ReplaceAll(raw, topicPlaceholder, "t"))
	if err != nil {
		return nil, usageErrorf("broker %s: %v", RedactURL(raw), err)
	}
	if u.Host == "" {
		return nil, usageErrorf("broker %s: the URL has no host; write %s://host/path", RedactURL(raw), u.Scheme)
	}
	if strings.ContainsAny(strings.ReplaceAll(raw, topicPlaceholder, ""), "{}") {
		return nil, usageErrorf("broker %s: a brace that is not part of %s; that is the only placeholder", RedactURL(raw), topicPlaceholder)
	}
	pub, err := webhook.NewPublisher(cfg)
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	return &brokerConn{name: RedactURL(raw), pub: pub}, nil
}
