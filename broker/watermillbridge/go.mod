module github.com/postbox-go/postbox/broker/watermillbridge

go 1.26.0

require (
	github.com/ThreeDotsLabs/watermill v1.5.1
	github.com/jackc/pgx/v5 v5.12.0
	github.com/postbox-go/postbox v0.0.0-00010101000000-000000000000
	github.com/postbox-go/postbox/driver/pgxv5 v0.0.0-00010101000000-000000000000
	github.com/postbox-go/postbox/internal/testenv v0.0.0-00010101000000-000000000000
	go.uber.org/goleak v1.3.0
)

require (
	github.com/google/uuid v1.6.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/lithammer/shortuuid/v3 v3.0.7 // indirect
	github.com/oklog/ulid v1.3.1 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/text v0.41.0 // indirect
)

replace (
	github.com/postbox-go/postbox => ../..
	github.com/postbox-go/postbox/driver/pgxv5 => ../../driver/pgxv5
	github.com/postbox-go/postbox/internal/testenv => ../../internal/testenv
)
