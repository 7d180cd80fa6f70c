package natsbroker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker/brokertest"
	natsbroker "github.com/postbox-go/postbox/broker/natsbroker"
)

// TestPublishToSubjectNoStreamHoldsSaysWhatToDo: publishing a topic no JetStream stream holds fails with
// JetStream's "no response from stream", which names no stream (issue 35: a relay repeated it for hours with no
// hint). The error must name the subject and the two fixes, and stay retryable, since the stream may be created
// while the relay runs.
func TestPublishToSubjectNoStreamHoldsSaysWhatToDo(t *testing.T) {
	js := connect(t, serverURL)
	topic := "nostream." + brokertest.Topic()
	pub, err := natsbroker.NewPublisher(js, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = pub.Publish(ctx, brokertest.Records(topic, 1, 1))
	var batch *postbox.BatchError
	if !errors.As(err, &batch) || len(batch.Errs) != 1 || batch.Errs[0] == nil {
		t.Fatalf("publish to a subject no stream holds: %v; want a BatchError with the record's error", err)
	}
	msg := batch.Errs[0].Error()
	for _, want := range []string{`no JetStream stream holds subject "` + topic + `"`, "?stream=NAME&subjects=" + topic} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error says no %q:\n%s", want, msg)
		}
	}
	if postbox.IsPermanent(batch.Errs[0]) {
		t.Errorf("the error is permanent; a stream created later must let the relay publish: %v", batch.Errs[0])
	}
}

// TestEnsureStreamOverlapNamesTheOtherStream: a stream whose subjects another stream holds is refused by the
// server with "subjects overlap with an existing stream", naming neither; EnsureStream names the stream and the
// subject it holds.
func TestEnsureStreamOverlapNamesTheOtherStream(t *testing.T) {
	js := connect(t, serverURL)
	topic := "overlap." + brokertest.Topic()
	first := streamPrefix + "OVERLAP_A_" + strings.ToUpper(brokertest.Topic())
	stream(t, js, jetstream.StreamConfig{Name: first, Subjects: []string{topic + ".>"}})
	second := streamPrefix + "OVERLAP_B_" + strings.ToUpper(brokertest.Topic())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := natsbroker.EnsureStream(ctx, js, jetstream.StreamConfig{Name: second, Subjects: []string{topic + ".eu"}})
	if err == nil {
		_ = js.DeleteStream(context.Background(), second)
		t.Fatal("EnsureStream made a stream whose subject another stream holds")
	}
	if want := "stream " + first + " already holds " + topic + ".>"; !strings.Contains(err.Error(), want) {
		t.Errorf("EnsureStream's overlap error says no %q:\n%v", want, err)
	}
}
