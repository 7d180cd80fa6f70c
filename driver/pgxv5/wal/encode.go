package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/driver"
	"github.com/postbox-go/postbox/internal/uuid"
)

// Version is the encoding version this package writes first in every message's content. A relay reads the
// versions up to its own and stops with an error on a later one, without confirming past it, so that upgrading
// the relays before the clients loses nothing.
const Version = 1

// Encode returns the content of the WAL message that carries r, in encoding Version 1:
//
//	version byte (1)
//	id: 16 bytes
//	created_at, available_at: signed varints, microseconds since the Unix epoch (available_at 0: at once)
//	topic, key, type: each an unsigned varint length and the bytes
//	headers: an unsigned varint count, then each name and value as a length and the bytes
//	payload: the remaining bytes
func Encode(r driver.Record) ([]byte, error) {
	id, err := uuid.Parse(r.ID)
	if err != nil {
		return nil, fmt.Errorf("postbox wal: ID: %w", err)
	}
	n := 1 + 16 + 2*binary.MaxVarintLen64 + 4*binary.MaxVarintLen32 + len(r.Topic) + len(r.Key) + len(r.Type) + len(r.Payload)
	for k, v := range r.Headers {
		n += 2*binary.MaxVarintLen32 + len(k) + len(v)
	}
	b := make([]byte, 0, n)
	b = append(b, Version)
	b = append(b, id[:]...)
	b = binary.AppendVarint(b, micros(r.CreatedAt))
	avail := int64(0)
	if r.AvailableAt.After(r.CreatedAt) {
		avail = micros(r.AvailableAt)
	}
	b = binary.AppendVarint(b, avail)
	b = appendString(b, r.Topic)
	b = appendString(b, r.Key)
	b = appendString(b, r.Type)
	b = binary.AppendUvarint(b, uint64(len(r.Headers)))
	for k, v := range r.Headers {
		b = appendString(b, k)
		b = appendString(b, v)
	}
	return append(b, r.Payload...), nil
}

// ErrVersion is wrapped by Decode's error for content written in an encoding version this package cannot read.
var ErrVersion = errors.New("postbox wal: unknown encoding version")

// Decode returns the record that Encode wrote into content, pending and never attempted. It reads a signed
// message (SignedVersion) too, without verifying its tag: a relay verifies the tag before it decodes (see
// RelayConfig.Secret).
//
// Decode refuses, with an error wrapping postbox.ErrInvalidMessage, a record that Enqueue would have refused
// (postbox.Message.Validate): whoever can write into the WAL can write any bytes, and a record no client could
// have enqueued is not a postbox message. Every length and count is checked against its limit before anything is
// allocated for it.
func Decode(content []byte) (driver.Record, error) {
	var r driver.Record
	if len(content) == 0 {
		return r, errors.New("postbox wal: empty message")
	}
	d := decoder{b: content[1:]}
	switch v := content[0]; v {
	case Version:
	case SignedVersion:
		d.bytes(tagSize)
	default:
		return r, fmt.Errorf("%w %d; this relay reads versions %d and %d: upgrade the relay", ErrVersion, v, Version, SignedVersion)
	}
	id := d.bytes(16)
	r.ID = uuid.Format([16]byte(id))
	r.CreatedAt = fromMicros(d.varint())
	r.AvailableAt = r.CreatedAt
	// An available_at not after created_at means at once, as Encode writes it (0), so that a round trip keeps it.
	if a := d.varint(); a != 0 && fromMicros(a).After(r.CreatedAt) {
		r.AvailableAt = fromMicros(a)
	}
	r.Topic = d.string("topic", postbox.MaxTopicLen)
	r.Key = d.string("key", postbox.MaxKeyLen)
	r.Type = d.string("type", postbox.MaxTypeLen)
	if n := d.uvarint(); n > 0 && d.err == nil {
		if n > postbox.MaxHeaders {
			d.refuse(fmt.Errorf("%w: %d headers; the limit is %d", postbox.ErrInvalidMessage, n, postbox.MaxHeaders))
		} else {
			r.Headers = make(map[string]string, n)
			for range n {
				k := d.string("header name", postbox.MaxHeaderNameLen)
				r.Headers[k] = d.string("header value", postbox.MaxHeaderLen)
			}
		}
	}
	if d.err != nil {
		return driver.Record{}, d.err
	}
	if len(d.b) > 0 {
		r.Payload = append([]byte(nil), d.b...)
	}
	if err := postbox.Message(r.Message).Validate(); err != nil {
		return driver.Record{}, fmt.Errorf("postbox wal: message %s: %w", r.ID, err)
	}
	r.Status = driver.StatusPending
	return r, nil
}

func micros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail() {
	d.refuse(errors.New("postbox wal: truncated or corrupt message"))
}

func (d *decoder) refuse(err error) {
	if d.err == nil {
		d.err = err
	}
	d.b = nil
}

func (d *decoder) bytes(n int) []byte {
	if d.err != nil || len(d.b) < n {
		d.fail()
		return make([]byte, n)
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

// string reads a length and that many bytes; a length over max is refused before anything is allocated.
func (d *decoder) string(field string, max int) string {
	n := d.uvarint()
	switch {
	case d.err != nil:
		return ""
	case n > uint64(max):
		d.refuse(fmt.Errorf("%w: the %s is %d bytes; the limit is %d", postbox.ErrInvalidMessage, field, n, max))
		return ""
	case n > uint64(len(d.b)):
		d.fail()
		return ""
	}
	return string(d.bytes(int(n)))
}
