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
	// A field the type does not have is ignored by default: a producer may add optional fields.
	got, err = postbox.DecodeJSON[placeOrder]([]byte(`{"order_id":"o-1","items":2,"colour":"red"}`))
	if err != nil || got != (placeOrder{OrderID: "o-1", Items: 2}) {
		t.Fatalf("DecodeJSON with an unknown field = %+v, %v; want it decoded, the field ignored", got, err)
	}
	if _, err := postbox.DecodeJSONStrict[placeOrder]([]byte(`{"order_id":"o-1","colour":"red"}`)); err == nil ||
		!strings.Contains(err.Error(), `unknown field "colour"`) {
		t.Errorf("DecodeJSONStrict with an unknown field: %v; want an error naming the field", err)
	}
	for _, tc := range []struct{ payload, want string }{
		{`{"order_id":"o-1"} {"order_id":"o-2"}`, "data after the first JSON value"},
		{`{"order_id":"o-1"}]`, "data after the first JSON value"},
		{``, "payload is empty"},
		{`{"items":"two"}`, "cannot unmarshal string"},
		{`{"order_id":`, "unexpected EOF"},
	} {
		for name, decode := range map[string]func([]byte) (placeOrder, error){
			"DecodeJSON": postbox.DecodeJSON[placeOrder], "DecodeJSONStrict": postbox.DecodeJSONStrict[placeOrder]} {
			_, err := decode([]byte(tc.payload))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "postbox_test.placeOrder") {
				t.Errorf("%s(%q) error %v; want one naming the type and saying %q", name, tc.payload, err, tc.want)
			}
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

	_, err = h(ctx, struct{}{}, postbox.Message{ID: "m-2", Type: "order.place", Payload: []byte(`{"order_id":"o-2","items":"one"}`)})
	if !postbox.IsPermanent(err) || !strings.Contains(err.Error(), "m-2") || calls != 1 {
		t.Fatalf("undecodable payload: %v (handler calls %d); want a permanent error naming the message, and no call", err, calls)
	}

	// An added field is ignored by JSONHandler and refused, as permanent, by JSONHandlerStrict.
	added := postbox.Message{ID: "m-5", Payload: []byte(`{"order_id":"o-5","items":1,"gift":true}`)}
	if out, err := h(ctx, struct{}{}, added); err != nil || len(out) != 1 || calls != 2 {
		t.Fatalf("payload with an added field: %v, %v (calls %d); want it handled", out, err, calls)
	}
	strict := postbox.JSONHandlerStrict(func(context.Context, struct{}, placeOrder, postbox.Message) ([]postbox.Event, error) {
		t.Fatal("the strict handler ran for a payload with an unknown field")
		return nil, nil
	})
	if _, err := strict(ctx, struct{}{}, added); !postbox.IsPermanent(err) || !strings.Contains(err.Error(), `unknown field "gift"`) {
		t.Fatalf("JSONHandlerStrict with an added field: %v; want a permanent error naming the field", err)
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
	for o, want := range map[postbox.Outcome]bool{postbox.Retry: false, postbox.Processed: true, postbox.Duplicate: true,
		postbox.Failed: true, postbox.Rejected: false} {
		if o.Ack() != want {
			t.Errorf("%v.Ack() = %v, want %v", o, o.Ack(), want)
		}
	}
	if s := postbox.Rejected.String(); s != "rejected" {
		t.Errorf("Rejected.String() = %q", s)
	}
}

// A command handler decodes its command, ignoring fields it does not know, and returns typed events; Process enqueues them in the handler's
// transaction.
func ExampleJSONHandler() {
	h := postbox.JSONHandler(func(ctx context.Context, tx struct{}, cmd placeOrder, m postbox.Message) ([]postbox.Event, error) {
		// Write the order on tx here.
		return []postbox.Event{{Topic: "orders", Key: cmd.OrderID, Type: "order.placed", Data: orderPlaced{cmd.OrderID}}}, nil
	})
	out, err := h(context.Background(), struct{}{}, postbox.Message{ID: "m-1", Payload: []byte(`{"order_id":"o-1","items":3}`)})
	fmt.Println(string(out[0].Payload), err)

	_, err = h(context.Background(), struct{}{}, postbox.Message{ID: "m-2", Payload: []byte(`{"order_id":"o-2","items":"three"}`)})
	fmt.Println(postbox.IsPermanent(err))
	// Output:
	// {"order_id":"o-1"} <nil>
	// true
}
