# The two commands of the README: `make demo` and `make test`. Both install what they need.
SHELL := /bin/bash
SWIFT ?= swift

.PHONY: deps build release demo test test-tsan bench-pow bench-socket

deps:
	@scripts/install-deps.sh

build: deps
	$(SWIFT) build

# Release binaries with the Swift runtime linked in: they run without a Swift toolchain.
release: deps
	$(SWIFT) build -c release --static-swift-stdlib --scratch-path .build-static

# The daemon against a local token service in the same process: no AWS account, no root.
demo: deps
	$(SWIFT) build --product waf-tokend
	$(SWIFT) build --product waf-tokenctl
	$$($(SWIFT) build --show-bin-path)/waf-tokend --demo

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

# GET /v1/token over the socket with h2load, beside a C epoll responder; RSS; idle wake-ups.
bench-socket: deps
	Benchmarks/socket-bench.sh
