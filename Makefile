GO        ?= go
BIN       := bin/pondctl
PKGS      := $(shell $(GO) list ./... | grep -v /acceptance)
# Packages with zero-allocation checks (tests named ...ZeroAllocs).
ALLOC_PKGS := $(sort $(dir $(shell grep -rl --include='*_test.go' '^func Test[A-Za-z0-9_]*ZeroAllocs' .)))
TESTFLAGS ?=
# Packages with benchmarks: bench-smoke builds only these.
BENCH_PKGS := $(sort $(dir $(shell grep -rl --include='*_test.go' '^func Benchmark' .)))
# go test's own vet pass is off: make vet runs all of go vet (a superset of
# the checks go test runs) once, instead of again for each of the unit,
# acceptance, bench-smoke and allocs builds. The test binaries are linked
# without DWARF (-w: stack traces and profiles do not need it), which
# takes some 40% less of the linker's time for each of them.
GOTEST    := $(GO) test -vet=off -ldflags=-w
# Acceptance tests that mostly wait (for agents, sites, leases) run this many
# at a time; each has its own directory, ports and site.
ACCEPTANCE_PARALLEL ?= 4
STATICCHECK_PKG := honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: all build test vet unit acceptance allocs bench bench-smoke smoke fuzz demo fmt lint clean print-staticcheck

all: build

build:
	$(GO) build -o $(BIN) ./cmd/pondctl

vet:
	$(GO) vet ./...
	@if command -v staticcheck >/dev/null 2>&1; then staticcheck ./...; \
	elif [ -x "$$($(GO) env GOPATH)/bin/staticcheck" ]; then "$$($(GO) env GOPATH)/bin/staticcheck" ./...; \
	else echo "staticcheck not installed: skipped (go install $(STATICCHECK_PKG))"; fi
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "not gofmt-formatted:"; gofmt -l $$(git ls-files '*.go'); exit 1; }

# Unit tests run under the race detector. SQLite's C translated to Go
# (modernc.org/sqlite/lib and modernc.org/libc) is built without its
# instrumentation, which made the queue's tests 4 to 7 times slower: the
# race detector still sees every access of pond's code and of the Go
# driver (modernc.org/sqlite, which stays instrumented: without it the
# detector loses track of what the driver orders), and the locks and
# atomics the translated C takes, but not that C's own memory.
RACEFLAGS := -race -gcflags=modernc.org/sqlite/lib=-race=false -gcflags=modernc.org/libc/...=-race=false
# Test packages run this many at a time. Beside the acceptance tests the
# machine has no idle CPU, and four at a time only stretched the tests'
# timings until some failed (a manager's restart past its test's guard,
# jobs matched but not yet started).
UNIT_PARALLEL ?= 2
# The longest test packages first (their time in make test, longest
# first): go test starts packages in the order it is given them, and a
# long one started last would run alone at the end.
UNIT_FIRST := overlay/factory overlay/agent providers/glidein condor/daemon condor/schedd \
	overlay/glidein/ec2 cmd/internal/cli overlay/glidein/slurm condor/startd condor/collector \
	condor/jobqueue overlay/glidein/ssh providers/local providers/sea
UNIT_PKGS := $(addprefix ./,$(UNIT_FIRST)) $(filter-out $(addprefix %/,$(UNIT_FIRST)),$(PKGS))
unit:
	$(GOTEST) $(RACEFLAGS) -p $(UNIT_PARALLEL) -count=1 -timeout 25m $(TESTFLAGS) $(UNIT_PKGS)

acceptance: build
	POND_BIN=$(CURDIR)/$(BIN) $(GOTEST) -count=1 -parallel $(ACCEPTANCE_PARALLEL) -timeout 40m $(TESTFLAGS) ./acceptance/...

# Allocation counts mean nothing under the race detector (sync.Pool drops
# items at random), so the zero-allocation checks are built without it
# (//go:build !race) and run here; so are the heap bounds of the schedd
# with tens of thousands of jobs (Test*Memory) and what a limited job query
# allocates (TestCEDARQueryLimitReadsFew), which skip under it, and the
# history's pruning at 10,000 jobs (2,000 under it).
allocs:
	$(GOTEST) -count=1 -run 'ZeroAllocs' $(TESTFLAGS) $(ALLOC_PKGS)
	$(GOTEST) -count=1 -run 'Memory$$|^TestHistoryPruned$$|^TestCEDARQueryLimitReadsFew$$' $(TESTFLAGS) ./condor/schedd/ ./condor/startd/

# Every benchmark once, so that none rots (only the packages that have
# benchmarks are built; make unit builds the others): -short and the sizes below keep
# each to a few agents, instances or MiB (the figures of docs/performance.md
# come from make bench and the commands there, not from this).
BENCH_SMOKE_ENV := POND_BENCH_MIB=64 POND_BENCH_ACT_JOBS=1000 TREEBENCH_SIZES=64 SEABENCH_SIZES=12 PONDBENCH_SIZES=12 AWSBENCH_SIZES=2 REQUEUEBENCH_SIZES=3 LOCALBENCH_JOBS=20
bench-smoke: build
	$(BENCH_SMOKE_ENV) POND_BIN=$(CURDIR)/$(BIN) $(GOTEST) -count=1 -short -run '^$$' -bench . -benchtime 1x -timeout 20m $(TESTFLAGS) $(BENCH_PKGS)

# The unit and acceptance tests, vet, bench-smoke and allocs run at the
# same time (this many of the five targets at once, the two longest
# first): the acceptance tests mostly wait on real processes, and so do
# most benchmarks of bench-smoke. Each one's output is printed whole when
# it ends, and any failure fails make test.
TEST_JOBS ?= 3
test:
	$(MAKE) --no-print-directory -j$(TEST_JOBS) --output-sync=target unit acceptance vet bench-smoke allocs

bench:
	$(GO) test -run '^$$' -bench . -benchmem -timeout 60m $(PKGS)

# Every fuzz target for FUZZTIME, one after another. The minimizing of a
# new input is bounded in runs: left at its default (60 s) it takes the
# whole FUZZTIME of a target whose seeds are large.
FUZZTIME ?= 60s
fuzz:
	@set -e; grep -rl --include='*_test.go' '^func Fuzz' . | sort | while read -r f; do \
	  for t in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$$f"); do \
	    echo "== $$(dirname $$f) $$t"; \
	    $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 1000x -parallel 1 "$$(dirname $$f)"; \
	  done; \
	done

demo: build
	./scripts/demo.sh

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin

# The staticcheck that vet and CI use, pinned.
print-staticcheck:
	@echo $(STATICCHECK_PKG)
