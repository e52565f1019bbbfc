# The two commands a new user needs are `make run` and `make test`; see README.md.
GO        ?= go
DATA      ?= ./.data
ADDR      ?= 127.0.0.1:8080
LAMBDAS   := $(patsubst functions/%/lambda,%,$(wildcard functions/*/lambda))
BUILD_DIR := build/lambda
STAGE     ?= dev
CDK_ARGS  ?=
# The CDK CLI, pinned (the npm `latest` tag is an old 3.0.0 that rejects current assemblies),
# run by npx from the project's ignored .cache, never installed globally.
CDK_CLI   := aws-cdk@2.1148.1
# jsii (the CDK's Go bindings) unpacks its modules into the ignored .cache, not the home directory.
CDK_ENV   := JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 JSII_RUNTIME_PACKAGE_CACHE_ROOT=$(CURDIR)/.cache/jsii

.PHONY: run demo test test-dynamodb fuzz fuzz-short lint build bench synth deploy clean

## run: start the local API on $(ADDR) with its data in $(DATA) (demo account on first start)
run:
	$(GO) run ./functions/local serve --addr $(ADDR) --data $(DATA)

## demo: the local API with Telegram, WhatsApp and VK played by fakes on this machine; write as a user and watch the demo bot answer
demo:
	$(GO) run ./tests/demo --data ./.data-demo --addr $(ADDR)

## test: formatting, vet, the DynamoDB store on DynamoDB Local, and every test (unit, store conformance, end-to-end) with the race detector, then each fuzz target for a few seconds
test: lint test-dynamodb
	bash tests/emulators/webpush/install.sh
	WEB_PUSH_TESTING_REQUIRED=1 $(GO) test -race -shuffle=on -count=1 -timeout 20m ./...
	$(MAKE) fuzz-short

## fuzz: every native fuzz target (strict decoder, cursor codecs, token parser, webhook parsers) for FUZZTIME each
FUZZTIME ?= 60s
fuzz:
	GO="$(GO)" FUZZTIME=$(FUZZTIME) bash tests/fuzz/run.sh

fuzz-short:
	GO="$(GO)" FUZZTIME=3s bash tests/fuzz/run.sh

## test-dynamodb: the DynamoDB store (conformance suite included) against AWS's DynamoDB Local, which the
## script installs under .cache/ and runs with the test binary in a private network namespace
test-dynamodb:
	GO="$(GO)" bash tests/emulators/dynamodb-test.sh

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

## bench: throughput and latency of the local API against a bare net/http handler, Lambda cold starts against a minimal function, inbound messages processed end to end against the local queue's no-op throughput, label-filtered subscriber listing over 100,000 subscribers against the unfiltered list, an email campaign to 10,000 recipients against a bare SMTP client sending the same messages, a funnel report over 1,000,000 events against a hand-written SQL query over the same table, and a broadcast's plan of 100,000 recipients against a bare insert loop and its send to a fake provider limited to 1,000 messages a second against that limit, and a CRM initial sync against the Pipedrive fake limited to 80 requests per 2 s against that limit, and the managed AI route's latency against a direct call to the OpenAI fake, each in the same run; and list pages, label pages and a conversation at 1k, 10k and 100k subscribers as ratios to 1k (the 1M run that draws docs/scale.png: go run ./tests/bench -scale)
bench:
	$(GO) run ./tests/bench
	$(GO) run ./tests/bench -lambda
	$(GO) run ./tests/bench -conversation
	$(GO) test -run '^$$' -bench ListByLabel -benchtime 10x ./functions/subscribers/
	$(GO) test -run '^$$' -bench Render20KB30Fields -benchtime 20000x ./shared/merge/
	$(GO) run ./tests/bench -email
	$(GO) run ./tests/bench -funnel
	$(GO) run ./tests/bench -broadcast
	$(GO) run ./tests/bench -webpush
	$(GO) run ./tests/bench -crm
	$(GO) run ./tests/bench -ai
	$(GO) run ./tests/bench -scale -scale-sizes 1k,10k,100k -scale-out ''

## synth: build the Lambdas, then write the CloudFormation template of $(STAGE) to cdk.out/ (offline, no AWS credentials)
synth: build
	$(CDK_ENV) CDK_OUTDIR=cdk.out CDK_CONTEXT_JSON='{"stage":"$(STAGE)"}' $(GO) run ./infra

## deploy: build the Lambdas, then deploy the stack of $(STAGE) with the pinned CDK CLI (extra flags in CDK_ARGS)
deploy: build
	$(CDK_ENV) npm_config_cache=$(CURDIR)/.cache/npm npx --yes $(CDK_CLI) deploy --all -c stage=$(STAGE) $(CDK_ARGS)

clean:
	rm -rf build cdk.out
