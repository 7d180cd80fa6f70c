package broker

import (
	"context"
	"time"

	"github.com/postbox-go/postbox"
)

// ConsumeHandler is the DeliveryHandler Consume gives the subscriber, with process standing in for
// Consumer.ProcessFrom, so that the settlement of every outcome can be tested without a database.
func ConsumeHandler(cfg *ConsumeConfig, process func(context.Context, *Delivery) (postbox.Result, error)) DeliveryHandler {
	return cfg.WithDefaults().handler(process)
}

// NackDelay is the default NackDelay.
func NackDelay(attempt int) time.Duration { return nackDelay(attempt) }
