# The two commands of the README: `make demo` and `make test`. Both install what they need.
SHELL := /bin/bash
SWIFT ?= swift
PREFIX ?= /usr
DESTDIR ?=

.PHONY: deps build release install demo test format test-repeat test-threads test-threads-run test-tsan test-asan bench-pow bench-socket bench-proxy bench-startup bench-auth bench-idle bench-fleet bench-providers size \
	mutants fuzz fuzz-ci \
	test-reliability deb image test-packages

deps:
	@scripts/install-deps.sh

build: deps
	$(SWIFT) build

# Release binaries with the Swift runtime linked in: they run without a Swift toolchain. Also the
# generate-manual tool that makes the man pages from them. (Not ArgumentParser's plugin command: it
# rebuilds the package in release without --static-swift-stdlib, over these binaries.)
release: deps
	SWIFT=$(SWIFT) scripts/swift-release.sh
	$(SWIFT) build --scratch-path .build-static --product generate-manual

# Binaries, units, sysusers/tmpfiles snippets, configuration and man pages under $(DESTDIR)$(PREFIX).
install: release
	PREFIX=$(PREFIX) DESTDIR=$(DESTDIR) SWIFT=$(SWIFT) scripts/install.sh

# out/waf-tokend_<version>_amd64.deb (debhelper, from the static release build), lintian-clean.
deb: release
	@scripts/install-deps.sh deb
	scripts/deb.sh

# The container image localhost/waf-tokend:<version>, FROM scratch, built offline with podman.
image: release
	@scripts/install-deps.sh image
	scripts/image.sh

# The package installed, upgraded, removed and purged under a real systemd; the image's two
# containers sharing the socket; the Kubernetes manifests against the image.
test-packages: deb image
	DEB_VERSION=$$(sed -n '1s/^waf-tokend (\([^)]*\)).*/\1/p' deploy/debian/changelog)+upgrade1 scripts/deb.sh
	$(SWIFT) build --build-tests
	SWIFT=$(SWIFT) scripts/swift-test.sh --skip-build --filter WAFPackageTests

# The daemon against a local token service in the same process: no AWS account, no root.
demo: deps
	$(SWIFT) build --product waf-tokend
	$(SWIFT) build --product waf-tokenctl
	$$($(SWIFT) build --show-bin-path)/waf-tokend --demo

# The whole suite, as CI runs it, on one debug build (the end-to-end test under systemd installs
# it; the static release build is tested as a package by test-packages). Every suite runs off the
# concurrency pool, watched for a blocked pool and within a bound (WAFTestTraits); check-watchers.sh shows
# both watchers fire. generate-manual is built here: a test cannot build while swift test runs.
test: deps
	scripts/check-rule-ids.sh
	scripts/check-suites.sh
	scripts/check-ports.sh
	scripts/check-imports.py
	$(SWIFT) format lint --strict --recursive $(FORMATTED)
	scripts/check-docs.py
	scripts/check-manifests.py
	promtool test rules deploy/prometheus/alerts.test.yml
	$(SWIFT) build --build-tests
	$(SWIFT) build --product generate-manual
	SWIFT=$(SWIFT) scripts/swift-test.sh --skip-build --skip WAFReliabilityTests --skip WAFPackageTests
	SWIFT=$(SWIFT) scripts/check-watchers.sh
	$(MAKE) --no-print-directory test-threads-run
	SWIFT=$(SWIFT) scripts/swift-test.sh --skip-build --filter WAFReliabilityTests

# TOK-4's tests start threads of their own and call a provider from all of them: 200 times over
# in one process (8 s). A thread that released a provider as it exited corrupted the heap in about
# one full run in ten; this catches that within 50 repetitions (docs/development.md).
test-threads: deps
	$(SWIFT) build --build-tests
	$(MAKE) --no-print-directory test-threads-run
test-threads-run:
	@log=$$(mktemp); \
	timeout 300 $$($(SWIFT) build --show-bin-path)/waf-tokendPackageTests.xctest --testing-library swift-testing --filter 'TOK4_' --repetitions 200 >$$log 2>&1 \
		|| { tail -40 $$log; rm -f $$log; echo "test-threads: TOK-4's thread tests failed, repeated 200 times (log above)" >&2; exit 1; }; \
	grep -a 'Test run with' $$log | tail -1; rm -f $$log

# What swift-format (in the toolchain) keeps formatted, by .swift-format; `make test` fails on a
# file that is not, `make format` formats them.
FORMATTED := Sources Tests Benchmarks Fuzz/Sources Package.swift Fuzz/Package.swift
format:
	$(SWIFT) format format --in-place --recursive $(FORMATTED)

# The suite N times over one build, and per test how many runs it failed (hunting a flake):
# make test-repeat N=5 [FILTER=REGEX]
N ?= 5
test-repeat: deps
	$(SWIFT) build --build-tests
	$(SWIFT) build --product generate-manual
	SWIFT=$(SWIFT) scripts/test-repeat.py $(N) $(if $(FILTER),--filter '$(FILTER)')

# The provider core, the wire format, the solvers, the local service's issuers, and the proxy with
# its own loop (its machine, its driver over socketpairs, its streams, TLS and pools) under a
# sanitizer, each in a build folder of its own. The suites over real HTTP and processes are left
# out: the sanitizers' slowdown overruns their per-request timeouts, and their runtimes trip on the
# helpers' child processes; so is the heap measurement, which the sanitizers' own bookkeeping
# inflates (docs/development.md).
SANITIZED := 'WAFTokenCoreTests|WireFormatTests|ProofOfWorkTests|SolveGateTests|LocalTokenServiceIssuerTests|WAFProxyLoopTests|WAFTokenProxyTests|WAFHTTPWireTests|ConnectionGuardTests'
test-tsan: deps
	SWIFT=$(SWIFT) scripts/swift-test.sh --sanitize=thread --scratch-path .build-tsan --filter $(SANITIZED) --skip StreamMemoryTests
# Memory errors (use after free, overflows, a pointer kept past its buffer); not leaks: LeakSanitizer
# reports the core's virtual-time tests' providers, never shut down by design, and Swift's weak
# side tables behind tagged pointers. What a connection holds is measured by StreamMemoryTests and
# the cgroup tests instead.
test-asan: deps
	ASAN_OPTIONS=detect_leaks=0 SWIFT=$(SWIFT) scripts/swift-test.sh --sanitize=address --scratch-path .build-asan --filter $(SANITIZED) --skip StreamMemoryTests

# Proof-of-work nonces/s on 1 and all cores, beside OpenSSL called from C in the same run.
bench-pow: deps
	Benchmarks/record.sh pow docs/performance.md Benchmarks/pow-bench.sh

# GET /v1/token over the socket with h2load, beside a C epoll responder; syscalls and CPU per
# request (strace, perf); RSS; idle wake-ups.
bench-socket: deps
	@scripts/install-deps.sh bench
	Benchmarks/record.sh socket docs/performance.md Benchmarks/socket-bench.sh

# The token-injecting proxy beside nginx (proxy_pass, fixed Cookie) to the same upstream.
bench-proxy: deps
	@scripts/install-deps.sh bench
	Benchmarks/record.sh proxy docs/performance.md Benchmarks/proxy-bench.sh

# nginx auth_request to GET /v1/auth beside the same nginx with a fixed Cookie; /v1/auth beside /v1/token.
bench-auth: deps
	@scripts/install-deps.sh bench
	Benchmarks/record.sh auth docs/performance.md Benchmarks/auth-bench.sh

# What 1,000 idle connections cost the daemon in private memory (goal: at most 16 MiB).
bench-idle: release
	Benchmarks/record.sh idle docs/performance.md Benchmarks/idle-connections.py 1000

# exec → READY=1 with a token in the state directory, beside a C program that only says READY=1.
bench-startup: deps
	@scripts/install-deps.sh bench
	Benchmarks/record.sh startup docs/performance.md Benchmarks/startup-bench.sh

# 1, 10 and 100 providers on one daemon: private memory per provider, start-up with every token
# restored, reads through ?provider= against a one-provider daemon, 100 providers refreshing at once.
bench-providers: deps
	@scripts/install-deps.sh bench
	Benchmarks/record.sh providers docs/performance.md Benchmarks/providers-bench.sh

# Binary sizes before and after strip, what each module costs, the daemon's RSS/PSS/private memory.
size: deps
	Benchmarks/record.sh size docs/performance.md Benchmarks/size.sh

# 10,000 provider machines on one virtual clock: the token service's load per second when a fleet
# starts together, restarts together, and outlives a ten-minute outage; with and without jitter.
bench-fleet: deps
	$(SWIFT) run -c release waf-fleet-sim

# Seeds single-point bugs into the provider core, one at a time, and shows that the core's tests
# fail on each within a time limit (a package of its own in .build-mutants/).
mutants: deps
	scripts/mutants.py

# Coverage-guided fuzzing (libFuzzer, AddressSanitizer) of every target in Fuzz/, FUZZ_SECONDS each.
fuzz: deps
	FUZZ_SECONDS=$${FUZZ_SECONDS:-600} scripts/fuzz.sh

# The short pass CI runs: every target for a bounded time.
fuzz-ci: deps
	FUZZ_SECONDS=$${FUZZ_SECONDS:-20} scripts/fuzz.sh

# The reliability suite at full scale: 1,000 kills, 10,000 signals, the whole fault matrix,
# floods and a soak of 10 million reads; each prints its figures. `make test` runs it bounded.
test-reliability: deps release
	WAF_RELIABILITY=full WAF_TEST_DEADLINE_SEC=7200 SWIFT=$(SWIFT) scripts/swift-test.sh --filter WAFReliabilityTests
