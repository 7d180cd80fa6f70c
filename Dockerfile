# The postbox daemon as a container image: a static binary (no libc) on distroless, running as a non-root user.
#
#   docker build -t postbox:dev --build-arg VERSION=v0.1.0 .
#   docker run --rm -p 9090:9090 -e POSTBOX_DB=postgres://... -e POSTBOX_BROKER=nats://... postbox:dev
#
# The image runs `postbox relay --http :9090` by default: /healthz, /readyz and /metrics on port 9090. Any other
# command replaces the default arguments: `docker run --rm postbox:dev migrate up --db postgres://...`.
# scripts/deploy-check.sh runs the build line below (the one starting CGO_ENABLED=0) and checks that the binary
# has no interpreter, so the distroless static base can run it.

FROM golang:1.26.8-bookworm AS build
WORKDIR /src
COPY . .
ARG VERSION=devel
RUN --mount=type=cache,target=/root/.cache/go-build --mount=type=cache,target=/go/pkg/mod \
    CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags="-s -w -X github.com/postbox-go/postbox/cmd/postbox/internal/cli.Version=${VERSION}" -o /out/postbox ./cmd/postbox

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/postbox /usr/local/bin/postbox
# distroless' nonroot user; the Helm chart runs it with a read-only root file system.
USER 65532:65532
EXPOSE 9090
ENTRYPOINT ["/usr/local/bin/postbox"]
CMD ["relay", "--http", ":9090"]
