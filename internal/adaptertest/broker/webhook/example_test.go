package webhook_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker/webhook"
)

// A receiver written with net/http alone, verifying the requests of a Postbox relay started with the same
// whsec_ secret in POSTBOX_WEBHOOK_SECRET. Verifier.Middleware refuses, with 401 and the reason, any request
// whose body, message ID, timestamp or Postbox headers are not the ones the relay signed, or that is older than
// five minutes.
func ExampleVerifier_Middleware() {
	// docs: verifier
	// The relay's secret, from your secret store; "whsec_" and base64, as Standard Webhooks libraries take it.
	secret := "whsec_cG9zdGJveC1leGFtcGxlLXNlY3JldC0wMTIzNDU2Nzg5"

	verifier := &webhook.Verifier{Secrets: []string{secret}}
	mux := http.NewServeMux()
	mux.Handle("POST /hooks/{topic}", verifier.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Verified: the body and these headers are the relay's. webhook-id is the message ID: dedup on it.
		body, _ := io.ReadAll(r.Body)
		fmt.Printf("topic %s, type %s, key %s: %s\n", r.Header.Get(webhook.HeaderTopic),
			r.Header.Get("ce-type"), r.Header.Get("ce-partitionkey"), body)
		w.WriteHeader(http.StatusNoContent)
	})))
	// docs: end

	srv := httptest.NewServer(mux)
	defer srv.Close()
	pub, err := webhook.NewPublisher(&webhook.PublisherConfig{URL: srv.URL + "/hooks/{topic}", Secret: secret})
	if err != nil {
		panic(err)
	}
	defer pub.Close()
	err = pub.Publish(context.Background(), []postbox.Record{{Message: postbox.Message{
		ID: postbox.NewID(), Topic: "orders", Key: "order-42", Type: "order.created", Payload: []byte(`{"id":42}`)}}})
	fmt.Println("published:", err == nil)
	// Output:
	// topic orders, type order.created, key order-42: {"id":42}
	// published: true
}
