# Multi-stage build of the agentplane image (`agentplane manager` in a cluster).
# Build: docker build -t ghcr.io/agentplane/agentplane:dev .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY config/crd/ config/crd/
COPY controllers/ controllers/
COPY facade/ facade/
COPY internal/ internal/
COPY pkg/ pkg/
# -tags nodevtools: the shipped binary carries no development tooling (`agentplane dev`).
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -tags nodevtools -ldflags "-s -w" -o /out/agentplane ./cmd/agentplane

# Distroless static, non-root: the manager needs no shell.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/agentplane /agentplane
USER 65532:65532
ENTRYPOINT ["/agentplane"]
CMD ["manager"]
