package postbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Route sends the messages whose topic matches Topics to Publisher.
type Route struct {
	// Topics is the pattern of the topics the route takes: '*' matches any run of characters, dots included, and
	// every other character matches itself. "orders.*" matches "orders.created" and "orders.eu.created"; "*"
	// matches every topic.
	Topics string
	// Publisher publishes the route's messages.
	Publisher Publisher
	// Name names the route's destination in logs, metrics and RelayStats.Destinations. Default: Topics. Routes
	// with the same Name are one destination, for health: give them the same name when they share a broker.
	Name string
}

// Router is a Publisher that sends each message to the publisher of the first route its topic matches, or to
// Default. Each destination's share of a batch is published at once beside the others. It implements
// Destinations, so a relay keeps health per route: one that is down or slow holds back only its own messages.
// A Router must not be changed once a relay uses it.
type Router struct {
	Routes []Route
	// Default takes the topics no route matches. When nil, such a message fails (and is retried) with an error
	// naming its topic.
	Default Publisher
	// DefaultName names Default's destination. Default: "default".
	DefaultName string

	names sync.Map // topic → destination index, -1 for Default
}

// Destination names the destination of topic's messages: the Name of the first route it matches, or DefaultName.
func (r *Router) Destination(topic string) string { return r.name(r.route(topic)) }

// DestinationNames names every destination: each route's, and Default's when it is set.
func (r *Router) DestinationNames() []string {
	var out []string
	for i := range r.Routes {
		if name := r.name(i); !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	if r.Default != nil && !slices.Contains(out, r.name(-1)) {
		out = append(out, r.name(-1))
	}
	return out
}

// name names the destination of route i, or of Default for -1.
func (r *Router) name(i int) string {
	switch {
	case i < 0 && r.DefaultName == "":
		return "default"
	case i < 0:
		return r.DefaultName
	case r.Routes[i].Name != "":
		return r.Routes[i].Name
	}
	return r.Routes[i].Topics
}

// route returns the index of topic's route, or -1 for Default.
func (r *Router) route(topic string) int {
	if i, ok := r.names.Load(topic); ok {
		return i.(int)
	}
	i := -1
	for j, rt := range r.Routes {
		if matchTopic(rt.Topics, topic) {
			i = j
			break
		}
	}
	r.names.Store(topic, i)
	return i
}

// Publish publishes each message through its route's publisher, each publisher's share at once beside the others,
// and returns a *BatchError when some failed.
func (r *Router) Publish(ctx context.Context, batch []Record) error {
	groups := map[int][]int{}
	errs := make([]error, len(batch))
	for i, rec := range batch {
		j := r.route(rec.Topic)
		if j < 0 && r.Default == nil {
			// Not permanent: adding a route and restarting the relay publishes it.
			errs[i] = fmt.Errorf("postbox: no route matches topic %q and the router has no Default publisher; add a route for it", rec.Topic)
			continue
		}
		groups[j] = append(groups[j], i)
	}
	var wg sync.WaitGroup
	for j, idx := range groups {
		pub := r.Default
		if j >= 0 {
			pub = r.Routes[j].Publisher
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			part := make([]Record, len(idx))
			for k, i := range idx {
				part[k] = batch[i]
			}
			err := pub.Publish(ctx, part)
			var be *BatchError
			for k, i := range idx {
				switch {
				case err == nil:
				case errors.As(err, &be) && len(be.Errs) == len(idx):
					errs[i] = be.Errs[k]
				default:
					errs[i] = err
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return &BatchError{Errs: errs}
		}
	}
	return nil
}

// matchTopic reports whether topic matches pattern, where * matches any run of characters (dots included) and
// every other character matches itself.
func matchTopic(pattern, topic string) bool {
	star, resume := -1, 0
	p, t := 0, 0
	for t < len(topic) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, resume = p, t
			p++
		case p < len(pattern) && pattern[p] == topic[t]:
			p++
			t++
		case star >= 0:
			resume++
			p, t = star+1, resume
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}
