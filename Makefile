GO        ?= go
BIN       := bin/pondctl
PKGS      := $(shell $(GO) list ./... | grep -v /acceptance)
TESTFLAGS ?=

.PHONY: all build test vet unit acceptance bench demo fmt lint clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/pondctl

vet:
	$(GO) vet ./...
	@if command -v staticcheck >/dev/null 2>&1; then staticcheck ./...; \
	elif [ -x "$$($(GO) env GOPATH)/bin/staticcheck" ]; then "$$($(GO) env GOPATH)/bin/staticcheck" ./...; \
	else echo "staticcheck not installed: skipped (go install honnef.co/go/tools/cmd/staticcheck@latest)"; fi
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "not gofmt-formatted:"; gofmt -l $$(git ls-files '*.go'); exit 1; }

# Unit tests run under the race detector.
unit:
	$(GO) test -race -count=1 -timeout 15m $(TESTFLAGS) $(PKGS)

acceptance: build
	POND_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout 40m $(TESTFLAGS) ./acceptance/...

test: vet unit acceptance

bench:
	$(GO) test -run '^$$' -bench . -benchmem -timeout 60m $(PKGS)

demo: build
	./scripts/demo.sh

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin
