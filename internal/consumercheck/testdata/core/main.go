// Command core uses the core module alone: it builds a message and prints its identity.
package main

import (
	"fmt"

	"github.com/postbox-go/postbox"
)

func main() {
	m := postbox.Message{ID: postbox.NewID(), Topic: "orders", Key: "order-1", Type: "order.created"}
	fmt.Println(m.ID, m.Topic)
}
