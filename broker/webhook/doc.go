// Package webhook delivers Postbox messages as signed HTTP POST requests, and receives them.
//
// # Wire format
//
// Each message is one POST whose body is the payload. Headers:
//
//	ce-specversion, ce-id, ce-source, ce-type, ce-time,
//	ce-subject, ce-partitionkey       CloudEvents 1.0 HTTP binding, binary mode (values percent-encoded)
//	<user headers>                    the message's headers, as they are (content-type, traceparent…)
//	Postbox-Headers                   comma-separated names of the user headers, in their original case
//	Postbox-Topic                     the message's topic
//	Postbox-Attempt                   1 on the first request for the message, then 2, 3… on relay retries
//	webhook-id                        the message ID
//	webhook-timestamp                 Unix seconds when the request was signed
//	webhook-signature                 "v1," + base64(HMAC-SHA256(key, id + "." + timestamp + "." + body))
//	Postbox-Signature                 "v1," + base64(HMAC-SHA256(key, id + "." + timestamp + "." + canonical headers))
//
// # Signatures
//
// webhook-id, webhook-timestamp and webhook-signature are the Standard Webhooks scheme, unchanged: a receiver
// built on any Standard Webhooks library, given the same whsec_ secret, verifies Postbox's requests and ignores
// Postbox-Signature. That scheme covers only the ID, the timestamp and the body, so Postbox adds
// Postbox-Signature, over the same ID and timestamp and the canonical form of the headers a Postbox receiver
// trusts (SignHeaders defines it: every ce-* header, Postbox-Topic, Postbox-Attempt, Postbox-Headers and the user
// headers it names, one "name:value\n" line each, names in lower case, sorted). Verifier and Receiver require
// both signatures, under the same key, so a captured request cannot be replayed with another topic, type, key
// or user header. Verifier.AllowUnsignedHeaders accepts senders that implement only Standard Webhooks.
//
// The signatures cover the message ID: a captured request replayed within the allowed clock skew carries the same
// ID, which the receiver's inbox recognises.
//
// # Secrets
//
// A secret is "whsec_" followed by the key in base64, the Standard Webhooks form providers issue, or any other
// text, whose bytes are the key (ParseSecret). Keys are at least MinSecretBytes (24) bytes; FormatSecret turns a
// key into its whsec_ form for a Standard Webhooks receiver.
//
// # Outcomes
//
// A 2xx response acknowledges the message. 408, 429, 5xx, timeouts and network errors are retried by the relay
// with its backoff. Any other status (4xx, and 3xx, since redirects are not followed) is permanent: the relay
// parks the message as dead with the status and the start of the response body as its error. A 400, 401 or 403
// error also names the likely cause, a receiver holding another secret.
//
// # Dedup
//
// HTTP has no broker-side dedup. A retried or replayed request carries the same message ID (webhook-id and
// ce-id); receivers dedup with Postbox's inbox (broker.Consume with the Receiver) or their own
// store keyed by that ID.
//
// # Receiving
//
// Receiver is an http.Handler and a broker.Subscriber: mount it on a server, and run Receive with a handler.
// A request is answered 204 once the handler acks it, 503 when it nacks (the sender retries), 422 when it
// rejects, 401 when the signature does not verify and 400 when it is not a Postbox CloudEvent. Verifier checks
// signatures on its own, and as middleware for other handlers.
package webhook
