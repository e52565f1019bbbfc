# The two commands a new user needs are `make run` and `make test`; see README.md.
GO        ?= go
DATA      ?= ./.data
ADDR      ?= 127.0.0.1:8080
LAMBDAS   := $(patsubst functions/%/lambda,%,$(wildcard functions/*/lambda))
BUILD_DIR := build/lambda

.PHONY: run test lint build bench clean

## run: start the local API on $(ADDR) with its data in $(DATA) (demo account on first start)
run:
	$(GO) run ./functions/local serve --addr $(ADDR) --data $(DATA)

## test: formatting, vet, and every test (unit, store conformance, end-to-end) with the race detector
test: lint
	$(GO) test -race -shuffle=on -count=1 -timeout 20m ./...

## lint: gofmt check and go vet
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './node_modules/*')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

## build: every Lambda as build/lambda/<family>/bootstrap for provided.al2023 on arm64
build:
	@for f in $(LAMBDAS); do \
		echo "build $$f"; \
		GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) build -tags lambda.norpc -trimpath -ldflags='-s -w' \
			-o $(BUILD_DIR)/$$f/bootstrap ./functions/$$f/lambda || exit 1; \
	done

## bench: throughput and latency of the local API against a bare net/http handler, same run
bench:
	$(GO) run ./tests/bench

clean:
	rm -rf build cdk.out
