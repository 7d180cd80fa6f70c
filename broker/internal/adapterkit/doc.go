// Package adapterkit holds the code the broker adapters share: the Receive guard, the batch result, the
// publisher's closed state and the waits between connection attempts. It is internal to the broker tree, so
// adapter modules import it and users cannot.
package adapterkit
