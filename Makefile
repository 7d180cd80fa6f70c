.PHONY: test demo services chaos fuzz bench

# Every module's vet and tests against the real services, started when down.
test:
	scripts/test.sh

# Orders to outbox to relay to NATS to inbox, on embedded SQLite and NATS, with no set-up.
demo:
	go run ./cmd/postbox/demo

services:
	scripts/services.sh

# The fault-injection suite at full size (50,000 events under relay SIGKILLs, broker, database and network faults),
# printing each scenario's ledger line. `make test` runs it at reduced size.
chaos:
	scripts/services.sh
	cd chaos && POSTBOX_CHAOS_FULL=1 go test -count=1 -v -timeout 120m ./...

# Every fuzzer for FUZZTIME each (default 200000x, a count of inputs); inputs that fail are kept under the package's testdata/fuzz.
fuzz:
	scripts/fuzz.sh

# Every benchmark scenario, the median of three runs each, against PostgreSQL and NATS (see docs/PERFORMANCE.md).
bench:
	scripts/services.sh
	go run ./bench/cmd/postbox-bench --runs 3
