module github.com/postbox-go/postbox/internal/consumercheck

go 1.26.0

require golang.org/x/mod v0.42.0
