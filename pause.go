package postbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/postbox-go/postbox/driver"
)

// DefaultPausedRefresh is how often a relay reads the paused topics by default (RelayConfig.PausedRefresh).
const DefaultPausedRefresh = 2 * time.Second

// PausedTopic is a topic whose messages relays hold back until it is resumed.
type PausedTopic struct {
	Topic string
	// PausedAt is when it was paused, on the pausing client's clock.
	PausedAt time.Time
	// PausedBy is who paused it, as the caller of PauseTopic named them; may be empty.
	PausedBy string
}

// PauseTopic pauses topic: relays stop claiming its messages within RelayConfig.PausedRefresh, and the messages
// wait, pending, until ResumeTopic. A batch already claimed is still published. Enqueue is not affected. It
// reports whether the topic was not paused already (pausing it again keeps the first pause's time and actor),
// and logs the change with actor. The paused set is a table of the table set (Migrate creates it).
func (c *Client[TTx]) PauseTopic(ctx context.Context, topic, actor string) (bool, error) {
	p, err := c.pauser(topic, actor)
	if err != nil {
		return false, err
	}
	changed, err := p.PauseTopic(ctx, driver.PausedTopic{Topic: topic, PausedAt: c.cfg.Clock.Now(), PausedBy: actor})
	if err != nil {
		return false, fmt.Errorf("postbox: pause topic %q: %w", topic, err)
	}
	if changed {
		c.logOp(ctx, "topic paused", actor, "topic", topic)
	}
	return changed, nil
}

// ResumeTopic resumes a paused topic: relays claim its messages again within RelayConfig.PausedRefresh. It
// reports whether the topic was paused, and logs the change with actor.
func (c *Client[TTx]) ResumeTopic(ctx context.Context, topic, actor string) (bool, error) {
	p, err := c.pauser(topic, actor)
	if err != nil {
		return false, err
	}
	changed, err := p.ResumeTopic(ctx, topic)
	if err != nil {
		return false, fmt.Errorf("postbox: resume topic %q: %w", topic, err)
	}
	if changed {
		c.logOp(ctx, "topic resumed", actor, "topic", topic)
	}
	return changed, nil
}

// PausedTopics lists the paused topics in topic order.
func (c *Client[TTx]) PausedTopics(ctx context.Context) ([]PausedTopic, error) {
	p, ok := c.store.(driver.TopicPauser)
	if !ok {
		return nil, c.noPause()
	}
	rows, err := p.PausedTopics(ctx)
	if err != nil {
		return nil, fmt.Errorf("postbox: paused topics: %w", err)
	}
	out := make([]PausedTopic, len(rows))
	for i, r := range rows {
		out[i] = PausedTopic(r)
	}
	return out, nil
}

func (c *Client[TTx]) pauser(topic, actor string) (driver.TopicPauser, error) {
	if topic == "" {
		return nil, fmt.Errorf("%w: the topic is empty; name the topic to pause or resume", ErrInvalidConfig)
	}
	if err := checkOperatorText("topic", topic, MaxTopicLen); err != nil {
		return nil, err
	}
	if err := checkOperatorText("actor", actor, MaxActorLen); err != nil {
		return nil, err
	}
	p, ok := c.store.(driver.TopicPauser)
	if !ok {
		return nil, c.noPause()
	}
	return p, nil
}

func (c *Client[TTx]) noPause() error {
	return fmt.Errorf("postbox: the %s driver cannot pause topics: %w", c.drv.Capabilities().Dialect, errors.ErrUnsupported)
}
