# hookrelay: make deps | up | down | status | build | test | faults | demo | bench | lint
# The local stack (deploy/local/) keeps its state in .local/ (git-ignored).

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

STACK := deploy/local
# State folder of the local stack; the same variable overrides it in deploy/local/env.sh.
STATE := $(or $(HOOKRELAY_STACK_DIR),.local)
# Ports of the local stack; the same variables override them in deploy/local/env.sh.
KAFKA_PORT := $(or $(HOOKRELAY_KAFKA_PORT),9092)
CLICKHOUSE_PORT := $(or $(HOOKRELAY_CLICKHOUSE_PORT),9000)
# `make test` points every integration and e2e test at the local stack.
TEST_ENV := HOOKRELAY_BROKERS=127.0.0.1:$(KAFKA_PORT) \
	HOOKRELAY_CLICKHOUSE=clickhouse://127.0.0.1:$(CLICKHOUSE_PORT)/default
# Two packages at a time on a 2-core machine; override with GOTEST_FLAGS=...
GOTEST_FLAGS ?= -p 2 -timeout 20m

.PHONY: help deps up down status build test faults demo bench lint clean reset

## help: list the targets
help:
	@sed -n 's/^## //p' $(MAKEFILE_LIST)

## deps: install what is missing: Debian packages, Kafka jars, Go modules, npm packages
deps:
	$(STACK)/deps.sh

## up: start Kafka (127.0.0.1:9092) and ClickHouse (127.0.0.1:9000), installing what they need first
up:
	$(STACK)/deps.sh apt kafka
	$(STACK)/up.sh

## down: stop the local stack (its data stays in .local/)
down:
	$(STACK)/down.sh

## status: show whether Kafka and ClickHouse are up
status:
	$(STACK)/status.sh

## build: build bin/hookrelay
build:
	go build -o bin/hookrelay ./cmd/hookrelay

## test: unit, integration and e2e tests against the local stack, which it starts
##       (fails if the e2e packages ran no test or skipped one; includes the reduced fault suite, e2e/faults)
test: deps up
	$(TEST_ENV) go test -count=1 $(GOTEST_FLAGS) -json ./... \
		| go run ./$(STACK)/testreport -require github.com/hookrelay/hookrelay/e2e \
			-require github.com/hookrelay/hookrelay/e2e/faults

# FAULTS_FLAGS passes go test flags, e.g. `make faults FAULTS_FLAGS='-run TestKillStorm'`.
# Each scenario's result is also appended as a JSON line to .local/faults/last.jsonl
# (docs/RELIABILITY.md's table), the whole output kept in .local/faults/last.txt.
FAULTS_FLAGS ?=

## faults: the full fault suite (e2e/faults, HOOKRELAY_FAULTS=full; docs/RELIABILITY.md) against
##         the local stack, which it starts; broker faults run on a private Kafka of its own
faults: deps up
	mkdir -p $(STATE)/faults
	rm -f $(STATE)/faults/last.jsonl
	$(TEST_ENV) HOOKRELAY_STACK_DIR=$(abspath $(STATE)) HOOKRELAY_FAULTS=full \
		HOOKRELAY_FAULTS_REPORT=$(abspath $(STATE))/faults/last.jsonl \
		go test -count=1 -p 1 -timeout 90m -v $(FAULTS_FLAGS) ./e2e/faults 2>&1 | tee $(STATE)/faults/last.txt

## demo: the main job on real input: stack, hookrelay, 3 verifying receivers, every @octokit/webhooks-examples payload
demo: deps up build
	go build -o bin/hookrelay-demo ./cmd/hookrelay-demo
	bin/hookrelay-demo $(DEMO_FLAGS)

# BENCH_FLAGS passes hookbench flags, e.g. `make bench BENCH_FLAGS=-quick` (two to three minutes)
# or `make bench BENCH_FLAGS='-scenarios 1,2 -profile 15s'`. The full run takes about 15-25 minutes.
# The output (progress, results, and the final JSON line) is also kept in .local/bench/last.txt.
BENCH_FLAGS ?=

## bench: benchmark harness (cmd/hookbench): 8 scenarios against the local stack, which it starts;
## ends with one JSON line holding every figure (see BENCHMARKS.md)
bench: deps up build
	go build -o bin/hookbench ./cmd/hookbench
	mkdir -p .local/bench
	$(TEST_ENV) bin/hookbench -hookrelay bin/hookrelay -stack-pids .local/pids $(BENCH_FLAGS) 2>&1 | tee .local/bench/last.txt

## lint: gofmt and go vet
lint:
	@out=$$(gofmt -l $$(go list -f '{{.Dir}}' ./...)); \
	if [[ -n $$out ]]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	go vet ./...

## clean: remove bin/
clean:
	rm -rf bin

## reset: stop the stack and wipe its data and logs (keeps the downloaded jars)
reset: down
	rm -rf $(STATE)/kafka/data $(STATE)/kafka/server.properties $(STATE)/kafka/cluster-id \
		$(STATE)/clickhouse $(STATE)/logs $(STATE)/pids
