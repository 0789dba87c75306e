# The two commands of the README: `make demo` and `make test`. Both install what they need.
SHELL := /bin/bash
SWIFT ?= swift

.PHONY: deps build test test-tsan

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
