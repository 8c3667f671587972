# Fathom's developer entry points. `make` lists them.
#
# Integration tests run against real services (PostgreSQL 15 + pgvector, Consul, MinIO) that
# scripts/test-env.sh installs into ~/.cache/fathom and starts on 127.0.0.1 under a temporary directory; they
# are always stopped again, whether the tests pass or not.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

GO ?= go
GOAL ?= Write a haiku about event sourcing
STATICCHECK_VERSION ?= v0.8.2
TEST_TIMEOUT ?= 20m
# Tests marked t.Parallel() run this many at a time (they wait on subprocesses more than they compute).
TEST_PARALLEL ?= 4
# Test packages run this many at a time (go test -p; Go's default is the number of cores). They wait on
# PostgreSQL, subprocesses and sockets as well as compute: on the 2-core CI machine, 3 took make test from 683 s to
# 451-570 s, quiet.
TEST_PACKAGES ?= 3
FAULTS_TIMEOUT ?= 25m
# Interleaved rounds of `make bench`; every row of BENCHMARKS.md is the median of the rounds, with their spread
# (3 keeps `make bench` at about 12 minutes on a quiet 2-core machine; the deterministic recall rows run in the first round only).
BENCH_ROUNDS ?= 3
# Packages to test; override to narrow a run, e.g. `make test PKGS=./persistence/...`.
PKGS ?= ./...
# The fault, heal and soak tests: every test of cmd/fathom whose body calls testenv.Faults(t). They skip unless
# FATHOM_TEST_FAULTS=1, which only `make test-faults` (and `make soak`, `make upgrade-soak`) set.
FAULT_TESTS = $(shell awk '/^func Test/ {name = $$2; sub(/\050.*/, "", name)} /testenv[.]Faults\050t\051/ && name != "" {print name; name = ""}' cmd/fathom/*_test.go | paste -sd '|')
# Size of `make soak` (TestSoak in cmd/fathom; `make test-faults` runs its short variant: 10 sessions, 5 kills).
SOAK_SESSIONS ?= 100
SOAK_KILLS ?= 50
SOAK_TIMEOUT ?= 15m
SOAK_LEASE_TTL ?= 5s
SOAK_CONSUL_CHECK_TTL ?= 2s
# make upgrade-soak FROM=<tag or commit>: the predecessor build (default: the newest v* tag, else the newest release the soak lists; v0.3.0 or later)
FROM ?=
UPGRADE_SESSIONS ?= 90
UPGRADE_RUNNING ?= 60
UPGRADE_TIMEOUT ?= 15m
# make soak / make upgrade-soak SOAK_LOGS=DIR: every member logs at debug level to a file in DIR (FATHOM_SOAK_LOGS)
SOAK_LOGS ?= $(FATHOM_SOAK_LOGS)

# with_services runs its argument in a shell where the test services are up and FATHOM_TEST_* is exported,
# and tears the services down on every exit path.
define with_services
dir=$$(mktemp -d); \
trap 'scripts/test-env.sh down "$$dir" || true; rm -rf "$$dir"' EXIT; \
scripts/install-go-deps.sh >/dev/null; \
scripts/test-env.sh up "$$dir" >/dev/null; \
. "$$dir/env"; \
$(1)
endef

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build the fathom binary into bin/fathom
	$(GO) build -o bin/fathom ./cmd/fathom

.PHONY: run
run: ## Run one session on embedded defaults (mock LLM, no services): make run GOAL="..."
	@echo "make run: building bin/fathom (the first build on a fresh machine compiles ~600 packages: 5-20 minutes on 2 cores; later builds take seconds)" >&2
	@$(GO) build -v -o bin/fathom ./cmd/fathom 2>&1 | awk '/^(#|[^ ]+\.go:)/ {print; err=1; next} {n++; if (n % 50 == 0) printf "make run: %d packages compiled\n", n > "/dev/stderr"} END {if (n) printf "make run: %d packages compiled\n", n > "/dev/stderr"; exit err}'
	bin/fathom run "$(GOAL)"

.PHONY: test
test: ## Start PostgreSQL+pgvector, Consul and MinIO, run all tests with -race (the fault tests skip: make test-faults), stop the services
	@export FATHOM_PG_FAST=1; $(call with_services,$(GO) test -race -count=1 -p $(TEST_PACKAGES) -parallel $(TEST_PARALLEL) -timeout $(TEST_TIMEOUT) $(PKGS) && \
		echo "== multi-member tests (Proto.Actor remoting races upstream) and GloVe tests (307 MB of JSON) excluded from -race" && \
		$(GO) test -count=1 -timeout 10m -run 'Consul|TwoActivations|AcrossNodes|GloVe' . ./cluster/... ./actors/session/ ./internal/node/ ./internal/fathomtest/ ./memory/gloveembed/)

.PHONY: test-faults
test-faults: ## Start the services, run the fault, heal and soak tests (kill -9, partitions, pauses, outages, rolling upgrade) with -race, stop them
	@if [ -z "$(FAULT_TESTS)" ]; then echo "make test-faults: no test of cmd/fathom calls testenv.Faults(t)" >&2; exit 1; fi
	@export FATHOM_PG_FAST=1 FATHOM_TEST_FAULTS=1; $(call with_services,$(GO) test -race -count=1 -timeout $(FAULTS_TIMEOUT) -run '^($(FAULT_TESTS))$$' ./cmd/fathom/)

.PHONY: test-unit
test-unit: ## Run the tests without services (integration tests skip)
	$(GO) test -count=1 $(PKGS)

.PHONY: bench
bench: ## Run the benchmark rows interleaved against the real services (durable PostgreSQL) and rewrite BENCHMARKS.md's tables (ratios, then the load runs); raw output in bench.out and bench-load.out
	@export FATHOM_PG_FAST=0; $(call with_services,$(GO) run ./internal/benchtable -rounds $(BENCH_ROUNDS) -out BENCHMARKS.md -raw bench.out && \
		$(GO) run ./internal/benchtable -table load -rounds 1 -out BENCHMARKS.md -raw bench-load.out)

.PHONY: proto
proto: ## Regenerate the Go code in messages/ (wire types, the event JSON marshallers) and messages/sessiongrain (the grain) from the .proto files
	@bin=$$(scripts/install-protoc.sh); \
	PATH="$$bin:$$PATH" protoc -I messages --go_out=. --go_opt=module=github.com/fathom-agents/fathom messages/*.proto messages/sessiongrain/*.proto; \
	PATH="$$bin:$$PATH" protoc -I messages --go-grain_out=. --go-grain_opt=module=github.com/fathom-agents/fathom messages/sessiongrain/grain.proto; \
	GOBIN="$$bin" $(GO) install ./messages/internal/protoc-gen-go-eventjson && \
	PATH="$$bin:$$PATH" protoc -I messages --go-eventjson_out=. --go-eventjson_opt=module=github.com/fathom-agents/fathom messages/events.proto

.PHONY: soak
soak: ## Kill -9 soak (make test-faults runs a short variant): 3 nodes, Consul, PostgreSQL, mock-llm 200 ms, sandboxed code_execute; figures in soak.out (see RELIABILITY.md)
	@export FATHOM_PG_FAST=1 FATHOM_TEST_FAULTS=1; $(call with_services,FATHOM_SOAK_SESSIONS=$(SOAK_SESSIONS) FATHOM_SOAK_KILLS=$(SOAK_KILLS) \
		FATHOM_SOAK_TIMEOUT=$(SOAK_TIMEOUT) FATHOM_SOAK_LEASE_TTL=$(SOAK_LEASE_TTL) FATHOM_SOAK_CONSUL_CHECK_TTL=$(SOAK_CONSUL_CHECK_TTL) FATHOM_SOAK_OUT=$(CURDIR)/soak.out FATHOM_SOAK_LOGS=$(if $(SOAK_LOGS),$(abspath $(SOAK_LOGS))) \
		$(GO) test -count=1 -timeout 20m -v -run '^TestSoak$$' ./cmd/fathom/ | grep -E '^(soak:|--- |\s+soak_test|FAIL|ok)')

.PHONY: upgrade-soak
upgrade-soak: ## Rolling upgrade with sessions running (make test-faults runs a short variant): 3 members of FROM replaced one by one by this tree; figures in upgrade.out (see RELIABILITY.md)
	@export FATHOM_TEST_FAULTS=1; $(call with_services,FATHOM_UPGRADE_FROM=$(FROM) FATHOM_UPGRADE_SESSIONS=$(UPGRADE_SESSIONS) FATHOM_UPGRADE_RUNNING=$(UPGRADE_RUNNING) \
		FATHOM_UPGRADE_TIMEOUT=$(UPGRADE_TIMEOUT) FATHOM_UPGRADE_OUT=$(CURDIR)/upgrade.out FATHOM_SOAK_LOGS=$(if $(SOAK_LOGS),$(abspath $(SOAK_LOGS))) \
		$(GO) test -count=1 -timeout 25m -v -run '^TestUpgradeSoak$$' ./cmd/fathom/ | grep -E '^(upgrade:|--- |\s+upgradesoak_test|FAIL|ok)')

.PHONY: lint
lint: ## gofmt, go vet and staticcheck
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

.PHONY: clean
clean: ## Remove build and benchmark output
	rm -rf bin bench.out bench-load.out
