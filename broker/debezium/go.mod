module github.com/postbox-go/postbox/broker/debezium

go 1.26.0
