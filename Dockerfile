# kvlens in a distroless image: a static binary, run as non-root. With no
# arguments the container serves the simulated demo on :8080.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/kvlens ./cmd/kvlens

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/kvlens /kvlens
USER nonroot:nonroot
EXPOSE 8080
ENTRYPOINT ["/kvlens"]
