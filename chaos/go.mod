module github.com/postbox-go/postbox/chaos

go 1.26.0

require (
	github.com/jackc/pgx/v5 v5.12.0
	github.com/nats-io/nats.go v1.55.0
	github.com/postbox-go/postbox v0.1.0
	github.com/postbox-go/postbox/broker/amqpbroker v0.1.0
	github.com/postbox-go/postbox/broker/natsbroker v0.1.0
	github.com/postbox-go/postbox/broker/webhook v0.1.0
	github.com/postbox-go/postbox/driver/pgxv5 v0.1.0
	github.com/postbox-go/postbox/driver/pgxv5/wal v0.1.0
	github.com/postbox-go/postbox/internal/testenv v0.1.0
	github.com/rabbitmq/amqp091-go v1.16.0
	go.uber.org/goleak v1.3.0
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/aws/aws-sdk-go-v2 v1.48.0
	github.com/aws/aws-sdk-go-v2/service/sqs v1.53.0
	github.com/go-sql-driver/mysql v1.10.1 // indirect
	github.com/jackc/pgio v1.0.0 // indirect
	github.com/jackc/pglogrepl v0.0.0-20251213150135-2e8d0df862c1 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/nats-io/nkeys v0.4.16 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	github.com/postbox-go/postbox/broker/sqsbroker v0.1.0
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)
