# The two commands of the README: `make demo` and `make test`. Both install what they need.
SHELL := /bin/bash
SWIFT ?= swift

.PHONY: deps build test test-tsan bench-pow

deps:
	@scripts/install-deps.sh

build: deps
	$(SWIFT) build

# The whole suite, as CI runs it.
test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test

# The suite under the thread sanitizer, in a build folder of its own.
test-tsan: deps
	$(SWIFT) test --sanitize=thread --scratch-path .build-tsan

# Proof-of-work nonces/s on 1 and all cores, beside Python's hashlib in the same run.
bench-pow: deps
	$(SWIFT) run -c release waf-pow-bench
