package drivertest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest"
)

type orderPlaced struct {
	OrderID string `json:"order_id"`
	Total   int    `json:"total"`
}

func (o *orderPlaced) Validate() error {
	if o.Total <= 0 {
		return errors.New("total must be positive")
	}
	return nil
}

// testRegistry checks that a client's registry refuses bad events at Enqueue, writing nothing, and that its
// relays park a stored event that breaks the registry as dead at once instead of publishing it.
func testRegistry[TTx any](t *testing.T, newDriver NewDriver[TTx]) {
	drv := newDriver(t)
	reg, err := postbox.NewRegistry(postbox.EventType{Type: "order.placed", Topic: "orders", KeyRequired: true,
		Payload: postbox.JSON[orderPlaced]()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	t.Run("EnqueueRefuses", func(t *testing.T) {
		cfg := Tables(nil)
		cfg.Registry = reg
		c := Client(t, drv, cfg)
		good := postbox.Message{Topic: "orders", Key: "o1", Type: "order.placed", Payload: []byte(`{"order_id":"o1","total":5}`)}
		bad := map[string]postbox.Message{
			"not in the registry":    {Topic: "orders", Key: "o1", Type: "order.lost", Payload: good.Payload},
			"belongs on topic":       {Topic: "payments", Key: "o1", Type: "order.placed", Payload: good.Payload},
			"requires a key":         {Topic: "orders", Type: "order.placed", Payload: good.Payload},
			"unknown field":          {Topic: "orders", Key: "o1", Type: "order.placed", Payload: []byte(`{"order_id":"o1","total":5,"x":1}`)},
			"total must be positive": {Topic: "orders", Key: "o1", Type: "order.placed", Payload: []byte(`{"order_id":"o1","total":0}`)},
		}
		for want, m := range bad {
			err := c.InTx(ctx, func(ctx context.Context, tx TTx) error {
				_, err := c.Enqueue(ctx, tx, m)
				if err == nil {
					t.Errorf("Enqueue accepted a message whose error should say %q", want)
					return nil
				}
				if !errors.Is(err, postbox.ErrInvalidMessage) || !strings.Contains(err.Error(), want) {
					t.Errorf("Enqueue error %q; want ErrInvalidMessage saying %q", err, want)
				}
				// The transaction stays usable: the good message still commits with it.
				_, err = c.Enqueue(ctx, tx, good)
				return err
			})
			if err != nil {
				t.Fatalf("the transaction failed after a refused message: %v", err)
			}
		}
		if s := stats(t, c); s.Pending != int64(len(bad)) {
			t.Fatalf("%d pending; want only the %d valid messages", s.Pending, len(bad))
		}
	})

	t.Run("RelayParksViolations", func(t *testing.T) {
		cfg := Tables(nil)
		plain := Client(t, drv, cfg) // no registry: writes what a registry would refuse
		good := postbox.Message{Topic: "orders", Key: "o1", Type: "order.placed", Payload: []byte(`{"order_id":"o1","total":5}`)}
		unknown := postbox.Message{Topic: "orders", Key: "o2", Type: "order.lost", Payload: []byte(`{}`)}
		malformed := postbox.Message{Topic: "orders", Key: "o3", Type: "order.placed", Payload: []byte(`{"order_id":3}`)}
		enqueue(t, plain, good, unknown, malformed)

		cfg.Registry = reg
		c, err := postbox.NewClient(drv, cfg)
		if err != nil {
			t.Fatal(err)
		}
		rec := &postboxtest.Recorder{}
		obs := &batchLog{}
		r := relay(t, c, rec, &postbox.RelayConfig{Observer: obs})
		if n := drain(t, r); n != 3 {
			t.Fatalf("claimed %d, want 3", n)
		}
		if got := rec.Records(); len(got) != 1 || got[0].Type != "order.placed" || got[0].Key != "o1" {
			t.Fatalf("published %+v; want only the valid message", got)
		}
		dead, err := c.ListDead(ctx, postbox.DeadFilter{All: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(dead) != 2 {
			t.Fatalf("%d dead; want the 2 violations parked at once", len(dead))
		}
		for _, d := range dead {
			if d.Attempts != 1 || !strings.Contains(d.LastError, "registry") {
				t.Errorf("dead %s: attempts %d, last error %q; want 1 attempt and an error naming the registry", d.Key, d.Attempts, d.LastError)
			}
		}
		reports := obs.get()
		if len(reports) != 1 || reports[0].Published() != 1 || len(reports[0].Records) != 3 {
			t.Fatalf("observer saw %d batches; want one of 3 records with 1 published", len(reports))
		}
		if d := reports[0].Dead; !d[1] || !d[2] || d[0] {
			t.Fatalf("observer dead flags %v; want the two violations", d)
		}
	})
}

type batchLog struct {
	mu      sync.Mutex
	reports []postbox.BatchReport
}

func (b *batchLog) ObserveBatch(_ context.Context, r postbox.BatchReport) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reports = append(b.reports, r)
}

func (b *batchLog) get() []postbox.BatchReport {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]postbox.BatchReport(nil), b.reports...)
}
