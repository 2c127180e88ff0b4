# kvlens: `make run` serves the demo; `make test` runs every test, installing
# what the tests need (npm packages, Debian's Chromium) when it is missing.

GO      ?= go
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
GOFILES := $(shell git ls-files '*.go' 2>/dev/null | grep -v '_templ.go$$')

.PHONY: run test unit browser lint generate vendor deps drift

run:
	$(GO) run ./cmd/kvlens

# test runs unit and browser side by side: the browser tests mostly wait for
# windows to settle (about half of one core over their 5 minutes), so on a
# 2-core machine the two together take little longer than unit alone. Each
# prints its output whole when it ends.
test: deps lint
	@echo "make test: unit and browser run side by side; each prints its output when it ends"
	@$(MAKE) --no-print-directory -j2 --output-sync=target unit browser

# unit runs every Go test, with the race detector, except the browser test
# and the tests in files built only without it (//go:build !race: long,
# deterministic simulations the race detector slows tenfold), which run in a
# second step without it. Their names are read from those files, so a test
# added to one cannot be left out.
# deploy/ is its own module so that the Kubernetes types it tests against
# stay out of the binary's dependencies.
NORACE_FILES := $(shell grep -rl --include='*_test.go' '^//go:build !race' --exclude-dir=node_modules --exclude-dir=deploy .)
NORACE_TESTS := $(shell sed -n 's/^func \(Test[A-Za-z0-9_]*\)(t \*testing\.T).*/\1/p' $(NORACE_FILES) | paste -sd'|')
NORACE_PKGS := $(sort $(dir $(NORACE_FILES)))
unit: deps
	KVLENS_REQUIRE_LIBZMQ=1 KVLENS_REQUIRE_NODE_SDK=1 KVLENS_REQUIRE_PROMTOOL=1 KVLENS_REQUIRE_PYXXHASH=1 $(GO) test -race -count=1 ./...
	$(GO) test -count=1 -run '^($(NORACE_TESTS))$$' $(NORACE_PKGS)
	cd deploy && $(GO) test -count=1 ./...

# browser drives the dashboard in a real Chromium (build tag `browser`).
# The one-fleet tests, which mostly wait for windows to settle, run three at
# a time after the A/B ones (see TestBrowserReconnects): 296 s where two at
# a time took 314-359 s, as the longest of them started first or last.
browser: deps
	KVLENS_REQUIRE_BROWSER=1 $(GO) test -tags browser -count=1 -parallel 3 -run Browser -v ./demo

lint:
	@out=$$(gofmt -l $(GOFILES)); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags browser ./demo
	cd deploy && $(GO) vet ./...

generate:
	$(GO) tool templ generate

vendor: node_modules/.package-lock.json
	npm run --silent vendor

node_modules/.package-lock.json: package.json package-lock.json
	npm ci --no-audit --no-fund

# deps installs what the tests need and the machine lacks: Chromium for the
# browser test, promtool for the metrics, and libzmq with Python's msgpack
# (Debian's python3-zmq, python3-msgpack) for the KV-event peer that vLLM's
# transport stands in for (kvevents/libzmq_test.go), and python3-xxhash, the
# xxHash project's C code, which the block hashes are held to
# (blockhash/reference_test.go).
deps: node_modules/.package-lock.json
	@command -v chromium >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1 && \
		/usr/bin/python3 -c 'import zmq, msgpack, xxhash' >/dev/null 2>&1 || { \
		echo "make: installing Debian's chromium, prometheus (promtool), python3-zmq, python3-msgpack and python3-xxhash for the tests"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium prometheus python3-zmq python3-msgpack python3-xxhash >/dev/null; }

# drift fails when the committed templ output or vendored assets differ from
# what their sources generate.
drift: node_modules/.package-lock.json
	$(GO) tool templ generate
	npm run --silent vendor
	@git diff --exit-code --stat -- '*_templ.go' web/static/vendor || { \
		echo "generated files have drifted: run 'make generate vendor' and commit the result"; exit 1; }
	@untracked=$$(git ls-files --others --exclude-standard -- '*_templ.go' web/static/vendor); \
		if [ -n "$$untracked" ]; then echo "generated files are not committed: $$untracked"; exit 1; fi
