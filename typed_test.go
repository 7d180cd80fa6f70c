package postbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/postbox-go/postbox"
)

type placeOrder struct {
	OrderID string `json:"order_id"`
	Items   int    `json:"items"`
}

type orderPlaced struct {
	OrderID string `json:"order_id"`
}

func TestDecodeJSON(t *testing.T) {
	got, err := postbox.DecodeJSON[placeOrder]([]byte(` {"order_id":"o-1","items":2} `))
	if err != nil || got != (placeOrder{OrderID: "o-1", Items: 2}) {
		t.Fatalf("DecodeJSON = %+v, %v", got, err)
	}
	for _, tc := range []struct{ payload, want string }{
		{`{"order_id":"o-1","colour":"red"}`, `unknown field "colour"`},
		{`{"order_id":"o-1"} {"order_id":"o-2"}`, "data after the first JSON value"},
		{`{"order_id":"o-1"}]`, "data after the first JSON value"},
		{``, "payload is empty"},
		{`{"items":"two"}`, "cannot unmarshal string"},
		{`{"order_id":`, "unexpected EOF"},
	} {
		_, err := postbox.DecodeJSON[placeOrder]([]byte(tc.payload))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "postbox_test.placeOrder") {
			t.Errorf("DecodeJSON(%q) error %v; want one naming the type and saying %q", tc.payload, err, tc.want)
		}
	}
}

func TestJSONHandler(t *testing.T) {
	ctx := context.Background()
	calls := 0
	h := postbox.JSONHandler(func(ctx context.Context, tx struct{}, cmd placeOrder, m postbox.Message) ([]postbox.Event, error) {
		calls++
		if cmd.Items == 0 {
			return nil, errors.New("an order needs items")
		}
		if cmd.OrderID == "bad" {
			return []postbox.Event{{Topic: "orders", Type: "order.placed", Data: make(chan int)}}, nil
		}
		return []postbox.Event{{Topic: "orders", Key: cmd.OrderID, Type: "order.placed", Data: orderPlaced{cmd.OrderID},
			Headers: map[string]string{"x-tenant": "acme"}}}, nil
	})

	out, err := h(ctx, struct{}{}, postbox.Message{ID: "m-1", Payload: []byte(`{"order_id":"o-1","items":1}`)})
	if err != nil || len(out) != 1 {
		t.Fatalf("handler = %v, %v", out, err)
	}
	if m := out[0]; m.Topic != "orders" || m.Key != "o-1" || m.Type != "order.placed" || string(m.Payload) != `{"order_id":"o-1"}` || m.Headers["x-tenant"] != "acme" {
		t.Fatalf("event encoded as %+v (payload %s)", m, m.Payload)
	}

	_, err = h(ctx, struct{}{}, postbox.Message{ID: "m-2", Type: "order.place", Payload: []byte(`{"order_id":"o-2","items":1,"x":1}`)})
	if !postbox.IsPermanent(err) || !strings.Contains(err.Error(), "m-2") || calls != 1 {
		t.Fatalf("undecodable payload: %v (handler calls %d); want a permanent error naming the message, and no call", err, calls)
	}

	_, err = h(ctx, struct{}{}, postbox.Message{ID: "m-3", Payload: []byte(`{"order_id":"o-3","items":0}`)})
	if err == nil || postbox.IsPermanent(err) || !strings.Contains(err.Error(), "needs items") {
		t.Fatalf("handler error: %v; want it returned as is, not permanent", err)
	}

	_, err = h(ctx, struct{}{}, postbox.Message{ID: "m-4", Payload: []byte(`{"order_id":"bad","items":1}`)})
	if err == nil || !strings.Contains(err.Error(), `encode event "order.placed"`) {
		t.Fatalf("unencodable event: %v; want an error naming the event type", err)
	}
}

func TestOutcome(t *testing.T) {
	for o, want := range map[postbox.Outcome]bool{postbox.Retry: false, postbox.Processed: true, postbox.Duplicate: true, postbox.Failed: true} {
		if o.Ack() != want {
			t.Errorf("%v.Ack() = %v, want %v", o, o.Ack(), want)
		}
	}
	if s := postbox.Duplicate.String(); s != "duplicate" {
		t.Errorf("Duplicate.String() = %q", s)
	}
}

func TestChainOrderAndTxHandler(t *testing.T) {
	var order []string
	mw := func(name string) postbox.Middleware {
		return func(next postbox.HandlerFunc) postbox.HandlerFunc {
			return func(ctx context.Context, m postbox.Message) ([]postbox.Message, error) {
				order = append(order, name)
				return next(ctx, m)
			}
		}
	}
	called := false
	h := postbox.Chain(mw("outer"), mw("middle"), mw("inner"))(postbox.TxHandler(
		func(ctx context.Context, tx int, m postbox.Message) ([]postbox.Message, error) {
			called = true
			return nil, nil
		}))
	_, err := h(context.Background(), postbox.Message{})
	if got := strings.Join(order, ","); got != "outer,middle,inner" {
		t.Fatalf("middleware ran in order %s; want the first outermost", got)
	}
	if err == nil || called || !strings.Contains(err.Error(), "Transaction middleware") {
		t.Fatalf("a Handler without a transaction in its context: called %v, error %v; want an error saying to add Transaction", called, err)
	}
}

// A command handler decodes its command strictly and returns typed events; Process enqueues them in the handler's
// transaction.
func ExampleJSONHandler() {
	h := postbox.JSONHandler(func(ctx context.Context, tx struct{}, cmd placeOrder, m postbox.Message) ([]postbox.Event, error) {
		// Write the order on tx here.
		return []postbox.Event{{Topic: "orders", Key: cmd.OrderID, Type: "order.placed", Data: orderPlaced{cmd.OrderID}}}, nil
	})
	out, err := h(context.Background(), struct{}{}, postbox.Message{ID: "m-1", Payload: []byte(`{"order_id":"o-1","items":3}`)})
	fmt.Println(string(out[0].Payload), err)

	_, err = h(context.Background(), struct{}{}, postbox.Message{ID: "m-2", Payload: []byte(`{"order_id":"o-2","itmes":3}`)})
	fmt.Println(postbox.IsPermanent(err))
	// Output:
	// {"order_id":"o-1"} <nil>
	// true
}
