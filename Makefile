# hap — see README.md. `make demo` and `make test` work on a fresh Debian
# machine with Go: they install the solver libraries first (scripts/setup-deps.sh).
GO       ?= go
FUZZTIME ?= 10s
export PATH := $(PATH):/usr/local/go/bin

.PHONY: all setup build test unit lint fuzz demo bench clean

all: build

setup:
	@scripts/setup-deps.sh

build: setup
	$(GO) build -o bin/hap ./cmd/hap

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

unit: setup
	$(GO) test -timeout 45m ./...

fuzz: setup
	FUZZTIME=$(FUZZTIME) scripts/fuzz.sh

# All tests: formatting and vet, unit tests, bounded fuzzing of every parser.
test: setup lint unit fuzz

# The main job on a built-in default: synthesize a plan for BERT-Base on the
# paper's 16-GPU V100/P100 cluster (global batch 32 × 16), explain it, then
# prove a synthesized tiny plan equal to single-device training.
demo: build
	./bin/hap plan --model bert-base --cluster paper-16 --batch 512 -o bin/bert-base.paper-16.plan.json
	./bin/hap explain bin/bert-base.paper-16.plan.json
	./bin/hap plan --model bert-base-tiny --cluster paper-8 --devices all -o bin/bert-base-tiny.paper-8.plan.json
	./bin/hap verify bin/bert-base-tiny.paper-8.plan.json

bench: build
	$(GO) test -run '^$$' -bench . ./...

clean:
	rm -rf bin
