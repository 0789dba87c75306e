#!/usr/bin/env python3
"""make mutants: shows that the core's tests test.

Each mutant is one single-point bug seeded into a copy of the provider core (a rule's constant, a
comparison, a branch). For each, the core and its tests are rebuilt in a package of their own
(.build-mutants/) and the core tests are run under a time limit: the mutant must make them fail.
A mutant the tests survive, or one that makes them hang past the limit, fails the run.

    scripts/mutants.py [--limit SECONDS] [--only SUBSTRING]
"""
import argparse, os, pathlib, shutil, subprocess, sys, time

ROOT = pathlib.Path(__file__).resolve().parent.parent
WORK = ROOT / ".build-mutants"
PACKAGE = WORK / "package"
LOGS = WORK / "logs"
CORE = "Sources/WAFTokenCore/"

# (file, original text, mutated text, what it breaks). The original must occur exactly once.
MUTANTS = [
    ("Machine/RetrySchedule.swift", "initialBackoff: Duration = .milliseconds(100)", "initialBackoff: Duration = .milliseconds(200)", "RET-1 first wait"),
    ("Machine/RetrySchedule.swift", "(1 << min(n - 1, 20))", "(1 << min(n, 20))", "RET-1 doubling"),
    ("Machine/RetrySchedule.swift", "return min(doubled, configuration.maxErrorTokenRefreshDelay)", "return doubled", "RET-1 cap"),
    ("Machine/RetrySchedule.swift", "refreshJitterFloor = 0.9", "refreshJitterFloor = 0.8", "RET-7 refresh floor"),
    ("Machine/RetrySchedule.swift", "errorPhaseJitterFloor = 0.5", "errorPhaseJitterFloor = 0.4", "RET-7 error-phase floor"),
    ("Machine/RetrySchedule.swift", "maximum.scaled(by: floor + (1 - floor) * unit)", "maximum.scaled(by: 1 + (1 - floor) * unit)", "RET-7 jitter lengthens"),
    ("Machine/RetrySchedule.swift", "min(1, max(0, randomUnit))", "randomUnit", "RET-7 unclamped randomness"),
    ("Machine/RetrySchedule.swift", "guard jitter else { return maximum }", "", "RET-7 jitter cannot be turned off"),
    ("Machine/Freshness.swift", "guard age > delay else { return false }", "guard age >= delay else { return false }", "TOK-7 boundary"),
    ("Machine/Freshness.swift", "if alwaysStale { return true }", "", "TOK-7/LIFE-3 paused reads fresh"),
    ("Machine/Freshness.swift", "if refreshInFirstAttempt { return false }", "", "TOK-7 stale during its first attempt"),
    ("Machine/Freshness.swift", "return now > due + Self.lateTimerTolerance", "return false", "TOK-9 a late timer trusted"),
    ("Machine/Freshness.swift", "lateTimerTolerance = Duration.seconds(1)", "lateTimerTolerance = Duration.seconds(3)", "TOK-9 tolerance"),
    ("Machine/ProviderMachine.swift", "staleOnceOld: !backgroundRefresh || refreshFellBehind", "staleOnceOld: refreshFellBehind", "TOK-2/7 on-demand token never stale"),
    ("Machine/ProviderMachine.swift", "staleOnceOld: !backgroundRefresh || refreshFellBehind", "staleOnceOld: true", "TOK-7 stale during a routine refresh"),
    ("Machine/ProviderMachine+Attempts.swift", "        consecutiveFailures += 1\n        refreshFellBehind = true", "        consecutiveFailures += 1", "TOK-7 failed refresh reads fresh"),
    ("Machine/ProviderMachine+Attempts.swift", "        heldSince = instant\n        refreshFellBehind = true", "        heldSince = instant", "TOK-7 held refresh reads fresh"),
    ("Machine/ProviderMachine.swift", "actions.insert(.publish(snapshot), at: 0)", "emit(.publish(snapshot))", "TOK-1 told before the cache holds it"),
    ("Machine/ProviderMachine+Requests.swift", "backgroundRefresh, let cached, isFresh(cached) {", "backgroundRefresh, let cached {", "TOK-3 stale token answered at once"),
    ("Machine/ProviderMachine+Requests.swift", "if !fetch.cancelled { restartSequenceAfterAttempt = true }", "", "RET-8 joining keeps the old budget"),
    ("Machine/ProviderMachine+Requests.swift", "        failuresInSequence = 0\n        beginAttempt()\n    }", "        beginAttempt()\n    }", "RET-8 no fresh budget"),
    ("Machine/ProviderMachine+Attempts.swift", "if waiter.failedAttempts > maxRetryCount {", "if waiter.failedAttempts >= maxRetryCount {", "RET-3 one retry short"),
    ("Machine/ProviderMachine+Attempts.swift", "} else if failuresInSequence <= maxRetryCount {", "} else if failuresInSequence < maxRetryCount {", "RET-2 error phase one early"),
    ("Machine/ProviderMachine+Attempts.swift", "if !backgroundRefresh && !keepTryingOnDemand && waiters.isEmpty {", "if false {", "RET-4 on-demand never gives up"),
    ("Machine/ProviderMachine+Attempts.swift", "case (.onDemand, .failure): emit(.answer(waiter.id, .onDemand(cached?.token)))", "case (.onDemand, .failure): emit(.answer(waiter.id, .onDemand(nil)))", "RET-4 previous token lost"),
    ("Machine/ProviderMachine+Attempts.swift", "armNext(at: now + retrySchedule.refreshWait())", "armNext(at: now + retrySchedule.refreshWait() + .seconds(1))", "RET-6 late refresh"),
    ("Machine/ProviderMachine+Attempts.swift", "if backgroundRefresh && !isActive { return hold(dueAt: instant) }", "", "LIFE-2 refresh while inactive"),
    ("Machine/ProviderMachine+Lifecycle.swift", "if waiters.isEmpty { cancelFetch() }", "", "LIFE-2 fetch in flight continues"),
    ("Machine/ProviderMachine+Lifecycle.swift", "        } else if next == nil {\n            beginAttempt()  // held", "        } else if false {\n            beginAttempt()  // held", "LIFE-4 held refresh waits"),
    ("Machine/ProviderMachine+Lifecycle.swift", "        if wasPaused {\n            failuresInSequence = 0\n            beginAttempt()", "        if wasPaused && false {\n            failuresInSequence = 0\n            beginAttempt()", "LIFE-4 pause not ended by a refresh"),
    ("Machine/ProviderMachine+Lifecycle.swift", "configuration.tokenRefreshDelay + .nanoseconds(1)", "configuration.tokenRefreshDelay", "LIFE-3 not longer than"),
    ("Machine/ProviderMachine+Lifecycle.swift", "configuration.tokenRefreshDelay + .nanoseconds(1)", "configuration.tokenRefreshDelay * 2", "LIFE-3 late pause"),
    ("Status/WAFLifecycle.swift", "case (.android, .background): true", "case (.android, .background): false", "LIFE-1 android profile"),
    ("Machine/FetchTime.swift", "Date(timeIntervalSince1970: 1_577_836_800)", "Date(timeIntervalSince1970: 1_577_836_799)", "TOK-8 2020 boundary"),
    ("Machine/FetchTime.swift", "guard fetchedAt >= earliest, age >= 0, age < 1e9 else", "guard fetchedAt >= earliest, age < 1e9 else", "TOK-8 future trusted"),
    ("Machine/FetchTime.swift", "guard fetchedAt >= earliest, age >= 0, age < 1e9 else", "guard fetchedAt >= earliest, age >= 0 else", "TOK-8 absurd wall clock"),
    ("Machine/ProviderMachine+Requests.swift", "age == nil || fetchedAt <= current.token.fetchedAt", "age == nil || fetchedAt < current.token.fetchedAt", "TOK-8 same-time load replaces"),
    ("Machine/ProviderMachine+Requests.swift", "loadedStale: age > configuration.tokenRefreshDelay", "loadedStale: age > configuration.tokenRefreshDelay * 2", "TOK-8 old restored token fresh"),
    ("Machine/ProviderMachine+Reconfigure.swift", "if new.configuration.identity != old.configuration.identity {", "if false {", "reload: identity change ignored"),
    ("Machine/ProviderMachine+Reconfigure.swift", "        refreshFellBehind = false\n        consecutiveFailures = 0\n        failuresInSequence = 0", "        refreshFellBehind = false\n        consecutiveFailures = 0", "reload: no fresh RET-1 sequence"),
    ("Machine/ProviderMachine+Reconfigure.swift", "if let cached { emit(.persist(record(for: cached))) }", "", "reload: storage not rewritten"),
    ("Machine/ProviderMachine+Attempts.swift", "case .failure(let error) where !ended.cancelled:", "case .failure(let error):", "LIFE-2 abandoned fetch counted"),
    ("Machine/ProviderMachine+Attempts.swift", "existingToken: cached?.token.value", "existingToken: nil", "protocol: existing_token not sent"),
    ("Machine/ProviderMachine+Reconfigure.swift", "for waiter in pending { answer(waiter, .failure(.unexpected(WAFProviderShutDownError()))) }", "", "TOK-6 waiters forgotten at stop"),
    ("Driver/ProviderDriver.swift", "fetches.removeValue(forKey: id)?.cancel()", "_ = fetches.removeValue(forKey: id)", "driver: fetch never cancelled"),
    ("Driver/WAFTokenProvider.swift", "            driver.send(.stop)\n            driver.finishObservers()\n        }\n    }\n\n    /// The configuration", "            driver.finishObservers()\n        }\n    }\n\n    /// The configuration", "driver: a dropped provider goes on"),
    ("Driver/DispatchScheduler.swift", "timers.schedule(at: BoottimeTimers.now() + max(0, delay.nanoseconds), work)", "timers.schedule(at: BoottimeTimers.now() + max(0, delay.nanoseconds) * 10, work)", "driver: timers 10x late"),
    ("Driver/BoottimeTimers.swift", "sorted { ($0.value.deadline, $0.key) < ($1.value.deadline, $1.key) }", "sorted { ($0.value.deadline, $0.key) > ($1.value.deadline, $1.key) }", "driver: timers due together out of order"),
    ("Driver/CallbackRunner.swift", "if state.busyLanes == 0 { return takeLane(&state) }", "return takeLane(&state)", "TOK-6 a lane per callback"),
    ("Driver/CallbackRunner.swift", "return from == state.started ? takeLane(&state) : nil", "return nil", "TOK-6 held up by a slow callback"),
    ("Cookies/WAFCookie.swift", "if request.count == cookie.count || cookie.last == UInt8(ascii: \"/\") { return true }", "if request.count == cookie.count { return true }", "COOK-1 trailing slash"),
    ("Cookies/WAFCookie.swift", "return request.dropFirst(cookie.count).first == UInt8(ascii: \"/\")", "return true", "COOK-1 prefix without a slash"),
    ("Cookies/WAFCookieManager.swift", "guard state.settings.setTokenCookie else { return nil }", "", "COOK-2 cookie when off"),
    ("Cookies/WAFCookie.swift", "lifetime: Duration = .seconds(24 * 3600)", "lifetime: Duration = .seconds(12 * 3600)", "COOK-3 expiry"),
    ("Configuration/WAFRangeProfile.swift", "case (.tokenRefreshDelaySec, .current): 88...300", "case (.tokenRefreshDelaySec, .current): 89...300", "CFG-10 current range"),
    ("Configuration/WAFRangeProfile.swift", "case (.maxRetryCount, .seed): 0...10", "case (.maxRetryCount, .seed): 0...11", "CFG-5 range"),
    ("Configuration/WAFHost.swift", "if let octets = ipv4Octets(bare) { return octets[0] == 127 }", "if let octets = ipv4Octets(bare) { return octets[0] == 127 || octets[0] == 10 }", "CFG-1 http beyond loopback"),
    ("Configuration/WAFConfigurationValidator.swift", "if PublicSuffixList.isPublicSuffix(domain) {", "if false {", "CFG-2 public suffix accepted"),
    ("Configuration/WAFConfigurationValidator.swift", '&& label.first != "-" && label.last != "-"', '&& label.first != "-"', "CFG-2 a label ending in -"),
    ("Configuration/WAFConfigurationValidator.swift", "if domain.utf8.count > 253 {", "if domain.utf8.count > 254 {", "CFG-2 a 254-character name"),
    ("Configuration/WAFConfigurationValidator.swift", "(1...63).contains(label.count)", "(1...64).contains(label.count)", "CFG-2 a 64-character label"),
    ("Machine/ProviderMachine+Requests.swift", "            return cache(loaded)", "            return adopt(loaded)", "RET-1/6 a load during a fetch resets the failures"),
    ("Machine/ProviderMachine+Attempts.swift", "armNext(at: now + retrySchedule.refreshWait())", "armNext(at: now + configuration.maxErrorTokenRefreshDelay)", "RET-6 refresh after the error delay"),
]

MANIFEST = """// swift-tools-version: 6.2
// Generated by scripts/mutants.py: the provider core and its tests alone, so that each mutant
// rebuilds in seconds.
import PackageDescription

let package = Package(
    name: "waf-tokend-mutants",
    dependencies: [
        .package(url: "https://github.com/apple/swift-crypto.git", "3.0.0"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.6.3"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.94.0"),
    ],
    targets: [
        .systemLibrary(name: "CLibPSL", pkgConfig: "libpsl"),
        .systemLibrary(name: "CLinuxTimers"),
        .target(name: "WAFTokenCore", dependencies: [
            "CLibPSL", "CLinuxTimers", .product(name: "Crypto", package: "swift-crypto"), .product(name: "Logging", package: "swift-log"),
            .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
        ]),
        .target(name: "WAFTokenCoreTestKit", dependencies: ["WAFTokenCore", .product(name: "NIOConcurrencyHelpers", package: "swift-nio")]),
        .target(name: "WAFTestTraits", dependencies: [.product(name: "NIOConcurrencyHelpers", package: "swift-nio")]),
        .testTarget(name: "WAFTokenCoreTests", dependencies: [
            "WAFTestTraits", "WAFTokenCore", "WAFTokenCoreTestKit", .product(name: "Logging", package: "swift-log"),
            .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
        ]),
    ],
    swiftLanguageModes: [.v6]
)
"""


def prepare():
    for part in ["Sources/CLibPSL", "Sources/CLinuxTimers", "Sources/WAFTokenCore", "Sources/WAFTokenCoreTestKit", "Sources/WAFTestTraits", "Tests/WAFTokenCoreTests"]:
        target = PACKAGE / part
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(ROOT / part, target)
    (PACKAGE / "Package.swift").write_text(MANIFEST)


def build():
    result = subprocess.run(["swift", "build", "--build-tests", "--package-path", str(PACKAGE)], capture_output=True, text=True)
    return result.returncode == 0, result.stdout + result.stderr


def test(limit, log=None):
    """'failed', 'passed' or 'hung'; the run's output goes to log when given."""
    try:
        result = subprocess.run(
            ["swift", "test", "--skip-build", "--package-path", str(PACKAGE)],
            capture_output=True, text=True, timeout=limit, env={"SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH": "16", **os.environ, "SWIFT_BACKTRACE": "enable=no"})
    except subprocess.TimeoutExpired as timeout:
        output = (timeout.stdout or b"") + (timeout.stderr or b"")
        if log: log.write_bytes(output if isinstance(output, bytes) else output.encode())
        return "hung"
    if log: log.write_text(result.stdout + result.stderr)
    return "passed" if result.returncode == 0 else "failed"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--limit", type=int, default=120, help="seconds a test run may take")
    parser.add_argument("--only", default="", help="run the mutants whose description contains this")
    arguments = parser.parse_args()

    PACKAGE.mkdir(parents=True, exist_ok=True)
    LOGS.mkdir(parents=True, exist_ok=True)
    prepare()
    ok, log = build()
    if not ok or test(arguments.limit) != "passed":
        print(log[-3000:])
        sys.exit("mutants: the unmutated core does not build or pass its tests; nothing to measure")

    selected = [m for m in MUTANTS if arguments.only in m[3]]
    print(f"{len(selected)} mutants of the provider core, each against the core tests (limit {arguments.limit} s)")
    survivors, started = [], time.time()
    for number, (name, original, mutated, what) in enumerate(selected, 1):
        path = PACKAGE / "Sources/WAFTokenCore" / name
        source = (ROOT / CORE / name).read_text()
        if source.count(original) != 1:
            survivors.append(f"{what}: the original text occurs {source.count(original)} times in {name}; fix the mutant list")
            print(f"{number:3} {what:45} STALE")
            continue
        path.write_text(source.replace(original, mutated))
        clock = time.time()
        built, log = build()
        # Each run's output is kept, so that a survivor can be looked into without running it again.
        verdict = test(arguments.limit, LOGS / f"{number:03}.log") if built else "failed to build"
        path.write_text(source)
        # A mutant that does not build tests nothing: it is a mistake in this list, not a kill.
        killed = verdict == "failed"
        print(f"{number:3} {what:45} {'killed' if killed else verdict.upper():16} {time.time() - clock:5.1f} s", flush=True)
        if not killed:
            survivors.append(f"{what} ({name}): {verdict}, output in {(LOGS / f'{number:03}.log').relative_to(ROOT)}")
    build()
    print(f"{len(selected) - len(survivors)} of {len(selected)} killed in {time.time() - started:.0f} s")
    if survivors:
        print("not killed:\n  " + "\n  ".join(survivors))
        sys.exit(1)


if __name__ == "__main__":
    main()
