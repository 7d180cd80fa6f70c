package kinesisbroker

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/broker"
)

// MaxPartitionKeyLen is the longest partition key Kinesis takes, in Unicode characters.
const MaxPartitionKeyLen = 256

// Envelope is a record's data on the stream: a CloudEvent in the CloudEvents JSON format (structured mode), since
// a Kinesis record has no headers. The payload is data when it is compact JSON, and data_base64 otherwise.
// Headers other than content-type (datacontenttype), traceparent and tracestate travel as one JSON object in the
// string extension postboxheaders.
type Envelope struct {
	SpecVersion     string          `json:"specversion"`
	ID              string          `json:"id"`
	Source          string          `json:"source"`
	Type            string          `json:"type"`
	Time            string          `json:"time,omitempty"`
	Subject         string          `json:"subject,omitempty"`
	PartitionKey    string          `json:"partitionkey,omitempty"`
	DataContentType string          `json:"datacontenttype,omitempty"`
	Traceparent     string          `json:"traceparent,omitempty"`
	Tracestate      string          `json:"tracestate,omitempty"`
	Headers         string          `json:"postboxheaders,omitempty"`
	Data            json.RawMessage `json:"data,omitempty"`
	DataBase64      string          `json:"data_base64,omitempty"`
}

// Encode returns the data of rec's Kinesis record. A key, type, header name or value that is not UTF-8 is refused.
func Encode(rec postbox.Record, source string) ([]byte, error) {
	if rec.ID == "" || rec.Type == "" {
		return nil, fmt.Errorf("kinesisbroker: message %q has no ID or no Type; CloudEvents requires both", rec.ID)
	}
	if source == "" {
		source = broker.DefaultSource
	}
	e := Envelope{SpecVersion: broker.SpecVersion, ID: rec.ID, Source: source, Type: rec.Type, Subject: rec.Key, PartitionKey: rec.Key}
	if !rec.CreatedAt.IsZero() {
		e.Time = rec.CreatedAt.UTC().Format(time.RFC3339Nano)
	}
	if !utf8.ValidString(rec.Key) || !utf8.ValidString(rec.Type) {
		return nil, fmt.Errorf("kinesisbroker: message %s: its key or type is not UTF-8; a CloudEvent in JSON carries text only", rec.ID)
	}
	rest := map[string]string{}
	for k, v := range rec.Headers {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return nil, fmt.Errorf("kinesisbroker: message %s: header %q is not UTF-8; a CloudEvent in JSON carries text only", rec.ID, k)
		}
		switch k {
		case "content-type":
			e.DataContentType = v
		case "traceparent":
			e.Traceparent = v
		case "tracestate":
			e.Tracestate = v
		default:
			rest[k] = v
		}
	}
	if len(rest) > 0 {
		b, err := json.Marshal(rest)
		if err != nil {
			return nil, fmt.Errorf("kinesisbroker: message %s: headers: %v", rec.ID, err)
		}
		e.Headers = string(b)
	}
	if len(rec.Payload) > 0 {
		var c bytes.Buffer
		if json.Valid(rec.Payload) && json.Compact(&c, rec.Payload) == nil && bytes.Equal(c.Bytes(), rec.Payload) {
			e.Data = rec.Payload
		} else {
			e.DataBase64 = base64.StdEncoding.EncodeToString(rec.Payload)
		}
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false) // keeps data byte for byte
	if err := enc.Encode(e); err != nil {
		return nil, fmt.Errorf("kinesisbroker: message %s: %v", rec.ID, err)
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), nil
}

// Decode reads a record's data written by Encode. The topic is the caller's to set.
func Decode(data []byte) (broker.Event, error) {
	var e Envelope
	if err := json.Unmarshal(data, &e); err != nil {
		return broker.Event{}, fmt.Errorf("%w: not a CloudEvents JSON object: %v", broker.ErrNotCloudEvent, err)
	}
	if e.SpecVersion != broker.SpecVersion || e.ID == "" || e.Type == "" {
		return broker.Event{}, fmt.Errorf("%w: specversion %q, id %q, type %q", broker.ErrNotCloudEvent, e.SpecVersion, e.ID, e.Type)
	}
	ev := broker.Event{Source: e.Source}
	ev.Message.ID, ev.Message.Type, ev.Message.Key = e.ID, e.Type, e.PartitionKey
	if ev.Message.Key == "" {
		ev.Message.Key = e.Subject
	}
	if e.Time != "" {
		t, err := time.Parse(time.RFC3339Nano, e.Time)
		if err != nil {
			return broker.Event{}, fmt.Errorf("%w: time %q: %v", broker.ErrNotCloudEvent, e.Time, err)
		}
		ev.Time = t.UTC()
	}
	h := map[string]string{}
	if e.Headers != "" {
		if err := json.Unmarshal([]byte(e.Headers), &h); err != nil {
			return broker.Event{}, fmt.Errorf("%w: postboxheaders is not a JSON object of strings: %v", broker.ErrNotCloudEvent, err)
		}
	}
	for k, v := range map[string]string{"content-type": e.DataContentType, "traceparent": e.Traceparent, "tracestate": e.Tracestate} {
		if v != "" {
			h[k] = v
		}
	}
	if len(h) > 0 {
		ev.Message.Headers = h
	}
	switch {
	case e.DataBase64 != "":
		p, err := base64.StdEncoding.DecodeString(e.DataBase64)
		if err != nil {
			return broker.Event{}, fmt.Errorf("%w: data_base64: %v", broker.ErrNotCloudEvent, err)
		}
		ev.Message.Payload = p
	case len(e.Data) > 0:
		ev.Message.Payload = []byte(e.Data)
	}
	return ev, nil
}

// partitionKey returns the Kinesis partition key of rec: its key, or its ID when it has none (spreading such
// messages over the shards), or "sha256-" and the key's SHA-256 in hex when the key is longer than Kinesis takes.
func partitionKey(rec postbox.Record) string {
	k := rec.Key
	if k == "" {
		return rec.ID
	}
	if utf8.RuneCountInString(k) <= MaxPartitionKeyLen && utf8.ValidString(k) {
		return k
	}
	sum := sha256.Sum256([]byte(k))
	return "sha256-" + hex.EncodeToString(sum[:])
}
