package webhook_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
	"github.com/postbox-go/postbox/broker/brokertest"
	"github.com/postbox-go/postbox/broker/webhook"
)

// receiving serves rcv and runs Receive with handle until the test ends.
func receiving(t *testing.T, rcv *webhook.Receiver, handle broker.DeliveryHandler) *httptest.Server {
	srv := httptest.NewServer(rcv)
	t.Cleanup(srv.Close)
	if handle == nil {
		return srv
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- rcv.Receive(ctx, func(ctx context.Context, d *broker.Delivery) {
			if d.Message.Type == "probe" {
				_ = d.Ack(ctx)
				return
			}
			handle(ctx, d)
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Receive: %v", err)
		}
	})
	// Requests get 503 until Receive has registered its handler.
	probe := brokertest.Records("probe", 1, 0)
	probe[0].Type = "probe"
	pub := publisher(t, srv.URL, webhook.PublisherConfig{})
	for deadline := time.Now().Add(10 * time.Second); pub.Publish(context.Background(), probe) != nil; {
		if time.Now().After(deadline) {
			t.Fatal("Receive did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return srv
}

func newReceiver(t *testing.T) *webhook.Receiver {
	rcv, err := webhook.NewReceiver(&webhook.ReceiverConfig{Verifier: webhook.Verifier{Secrets: []string{testSecret}}, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	return rcv
}

func TestReceiverOutcomes(t *testing.T) {
	srv := receiving(t, newReceiver(t), func(ctx context.Context, d *broker.Delivery) {
		switch d.Message.Type {
		case "fail":
			_ = d.Nack(ctx, 1500*time.Millisecond)
		case "poison":
			_ = d.Reject(ctx)
		default:
			_ = d.Ack(ctx)
		}
	})
	pub := publisher(t, srv.URL, webhook.PublisherConfig{})
	recs := brokertest.Records("orders", 3, 0)
	recs[1].Type, recs[2].Type = "fail", "poison"
	err := pub.Publish(context.Background(), recs)
	var be *postbox.BatchError
	if !errors.As(err, &be) {
		t.Fatalf("Publish = %v", err)
	}
	if be.Errs[0] != nil {
		t.Errorf("acked message: %v", be.Errs[0])
	}
	if e := be.Errs[1]; e == nil || postbox.IsPermanent(e) || !strings.Contains(e.Error(), "503") {
		t.Errorf("nacked message: %v, want a retryable 503", e)
	}
	if e := be.Errs[2]; !postbox.IsPermanent(e) || !strings.Contains(e.Error(), "422") {
		t.Errorf("rejected message: %v, want a permanent 422", e)
	}
}

func TestReceiverRefuses(t *testing.T) {
	rcv := newReceiver(t)
	var handled int
	srv := receiving(t, rcv, func(ctx context.Context, d *broker.Delivery) { handled++; _ = d.Ack(ctx) })
	c := client(t)
	do := func(method string, h http.Header, body string) (int, string) {
		t.Helper()
		return send(t, c, method, srv.URL, h, body)
	}
	valid := func(id string) http.Header {
		h := http.Header{}
		h.Set("ce-specversion", "1.0")
		h.Set("ce-id", "m1")
		h.Set("ce-type", "t")
		h.Set(webhook.HeaderTopic, "orders")
		return signRequest(testKey, h, id, time.Now(), "x")
	}
	if status, _ := do(http.MethodGet, valid("m1"), "x"); status != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d", status)
	}
	if status, msg := do(http.MethodPost, nil, "x"); status != http.StatusUnauthorized || !strings.Contains(msg, "missing header") {
		t.Errorf("unsigned: %d %q", status, msg)
	}
	notCE := signed(testKey, "m1", time.Now(), "x")
	if status, msg := do(http.MethodPost, notCE, "x"); status != http.StatusBadRequest || !strings.Contains(msg, "CloudEvents") {
		t.Errorf("signed but not a CloudEvent: %d %q", status, msg)
	}
	if status, msg := do(http.MethodPost, valid("m2"), "x"); status != http.StatusBadRequest || !strings.Contains(msg, "differs from ce-id") {
		t.Errorf("ce-id other than the signed ID: %d %q", status, msg)
	}
	if handled != 0 {
		t.Fatalf("handler called %d times for refused requests", handled)
	}
	if status, _ := do(http.MethodPost, valid("m1"), "x"); status != http.StatusNoContent || handled != 1 {
		t.Fatalf("valid request: %d, handled %d", status, handled)
	}
}

func TestReceiverNotReceiving(t *testing.T) {
	srv := receiving(t, newReceiver(t), nil)
	err := publisher(t, srv.URL, webhook.PublisherConfig{}).Publish(context.Background(), brokertest.Records("t", 1, 0))
	if err == nil || postbox.IsPermanent(err) || !strings.Contains(err.Error(), "503") {
		t.Fatalf("Publish while no Receive runs = %v; want a retryable 503", err)
	}
}

func TestRetryAfter(t *testing.T) {
	srv := receiving(t, newReceiver(t), func(ctx context.Context, d *broker.Delivery) { _ = d.Nack(ctx, 2500*time.Millisecond) })
	h := http.Header{}
	h.Set("ce-specversion", "1.0")
	h.Set("ce-id", "m1")
	h.Set("ce-type", "t")
	h.Set(webhook.HeaderTopic, "orders")
	h = signRequest(testKey, h, "m1", time.Now(), "")
	req, _ := http.NewRequest(http.MethodPost, srv.URL, nil)
	req.Header = h
	resp, err := client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "3" {
		t.Fatalf("nack with 2.5s delay: %d Retry-After %q; want 503 and 3", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}
