module github.com/postbox-go/postbox/broker/mqttbroker

go 1.26.0

replace github.com/postbox-go/postbox => ../..

require (
	github.com/eclipse/paho.golang v0.23.0
	github.com/postbox-go/postbox v0.0.0-00010101000000-000000000000
	github.com/postbox-go/postbox/internal/testenv v0.0.0-00010101000000-000000000000
	go.uber.org/goleak v1.3.0
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/go-sql-driver/mysql v1.10.1 // indirect
	github.com/gorilla/websocket v1.5.3 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/pgx/v5 v5.12.0 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/postbox-go/postbox/driver/pgxv5 v0.0.0-00010101000000-000000000000 // indirect
	golang.org/x/net v0.43.0 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/text v0.41.0 // indirect
)

replace (
	github.com/postbox-go/postbox/driver/pgxv5 => ../../driver/pgxv5
	github.com/postbox-go/postbox/internal/testenv => ../../internal/testenv
)
