package chaos

import (
	"context"
	"github.com/postbox-go/postbox/internal/testenv/tcpproxy"
	"testing"
	"time"
)

// TestNetworkFault: the relays reach their broker through a proxy that, while events flow, stalls every byte for
// three seconds, then cuts every connection and refuses new ones for two seconds, then cuts them once more. The
// relays' publishes time out or fail and are retried; nothing is lost and, since no relay dies, nothing is
// acknowledged twice.
func TestNetworkFault(t *testing.T) {
	events, over := size(3000, 20000), size(10*time.Second, 40*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), deadline())
	defer cancel()
	w := newWorld(t, "netfault", worldOptions{})
	proxy := tcpproxy.Start(t, w.nats.Addr())
	rc := w.relayConfig()
	rc.URL = "nats://" + proxy.Addr()
	rc.Workers = 2
	w.goRelay(rc)
	w.goConsumer(w.consumerConfig())
	w.produce(ctx, events, over)

	wait(ctx, over/5)
	proxy.Stall()
	wait(ctx, 3*time.Second)
	proxy.Resume()

	wait(ctx, over/5)
	proxy.Refuse(true)
	proxy.Cut()
	wait(ctx, 2*time.Second)
	proxy.Refuse(false)

	wait(ctx, over/5)
	proxy.Cut()

	w.settle(ctx)
	w.verdict(ctx, expect{events: events, dupBound: 0, bound: "no relay died: a publish is retried only when it was not acknowledged",
		fault: "relay-to-broker path stalled 3s, cut and refused 2s, cut again", felt: publishFailed})
}
