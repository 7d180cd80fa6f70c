module github.com/postbox-go/postbox/broker/webhook

go 1.25.0

require github.com/postbox-go/postbox v0.1.0
