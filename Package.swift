// swift-tools-version: 6.2
import PackageDescription

/// Every target of ours is built in Swift 6 mode with warnings as errors: "no warnings" is a build
/// failure, not a convention.
let strict: [SwiftSetting] = [
    .treatAllWarnings(as: .error)
]

/// The proxy's hot path (its loop, its HTTP reading, its connections) without the dynamic
/// exclusivity checks of a release build: each read of a class's stored property that a mutation
/// could overlap asked the runtime, 3 % of the proxy's cycles (docs/decisions.md). Debug builds,
/// and so every test and sanitizer run, keep them.
let hotPath: [SwiftSetting] = strict + [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))]

let nio: [Target.Dependency] = [
    .product(name: "NIOCore", package: "swift-nio"),
    .product(name: "NIOPosix", package: "swift-nio"),
    .product(name: "NIOHTTP1", package: "swift-nio"),
    .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
]
let logging: Target.Dependency = .product(name: "Logging", package: "swift-log")

let package = Package(
    name: "waf-tokend",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "WAFTokenCore", targets: ["WAFTokenCore"]),
        .library(name: "WAFTokenCoreTestKit", targets: ["WAFTokenCoreTestKit"]),
        .library(name: "WAFProxyLoop", targets: ["WAFProxyLoop"]),
        .library(name: "WAFProxyLoopTestKit", targets: ["WAFProxyLoopTestKit"]),
        .library(name: "WAFChallenge", targets: ["WAFChallenge"]),
        .library(name: "WAFTokenServiceHTTP", targets: ["WAFTokenServiceHTTP"]),
        .library(name: "WAFLocalTokenService", targets: ["WAFLocalTokenService"]),
        .library(name: "WAFHTTPWire", targets: ["WAFHTTPWire"]),
        .library(name: "WAFDaemonTransport", targets: ["WAFDaemonTransport"]),
        .library(name: "WAFDaemonConfiguration", targets: ["WAFDaemonConfiguration"]),
        .library(name: "WAFProviderRegistry", targets: ["WAFProviderRegistry"]),
        .library(name: "WAFTokenStorage", targets: ["WAFTokenStorage"]),
        .library(name: "WAFSocketAPI", targets: ["WAFSocketAPI"]),
        .library(name: "WAFTokenProxy", targets: ["WAFTokenProxy"]),
        .library(name: "WAFTokenDaemon", targets: ["WAFTokenDaemon"]),
        .library(name: "WAFDaemonClient", targets: ["WAFDaemonClient"]),
        .executable(name: "waf-tokend", targets: ["waf-tokend"]),
        .executable(name: "waf-tokenctl", targets: ["waf-tokenctl"]),
        .executable(name: "waf-token-service", targets: ["waf-token-service"]),
        .executable(name: "waf-pow-bench", targets: ["waf-pow-bench"]),
        .executable(name: "waf-fleet-sim", targets: ["waf-fleet-sim"]),
        .executable(name: "waf-tokend-wedge", targets: ["waf-tokend-wedge"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-crypto.git", "3.0.0"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.6.3"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.94.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.34.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-configuration.git", from: "1.0.0", traits: []),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.7.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.0.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-system.git", from: "1.5.0"),
    ],
    targets: [
        // C libraries from Debian: the Public Suffix List (CFG-2), systemd's sd_notify, watchdog,
        // socket activation and journal, libyaml for the configuration file, OpenSSL's libcrypto.
        // Headers only: CLibrariesOnDemand loads libpsl, libyaml and libsystemd on first use
        // (no pkg-config, which would link them: 0.5 ms off every exec, docs/performance.md).
        .systemLibrary(name: "CLibPSL", providers: [.apt(["libpsl-dev", "publicsuffix"])]),
        .systemLibrary(name: "CSystemd", providers: [.apt(["libsystemd-dev"])]),
        .systemLibrary(name: "CYAML", providers: [.apt(["libyaml-dev"])]),
        // OpenSSL's libcrypto for the proof-of-work hot loops (WAFChallenge/NonceHasher.swift), and
        // libssl for the proxy loop's TLS: headers only, the functions loaded on first use by
        // CLibrariesOnDemand (not linked: 1.9 ms off every exec, docs/performance.md).
        .systemLibrary(name: "COpenSSL", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CLibSSL", providers: [.apt(["libssl-dev"])]),
        .target(name: "CLibrariesOnDemand"),
        // timerfd, which Swift's Glibc module leaves out: the provider's timers on CLOCK_BOOTTIME (TOK-9).
        .systemLibrary(name: "CLinuxTimers"),
        .systemLibrary(name: "CEpoll"),

        // The SDK core: configuration, token, the provider's decisions (a pure state machine) and
        // their Dispatch-driven driver, cookies. No I/O of its own.
        .target(
            name: "WAFTokenCore",
            dependencies: [
                "CLibPSL", "CLibrariesOnDemand", "CLinuxTimers", logging, .product(name: "Crypto", package: "swift-crypto"),
                // pthread-based locks: visible to the thread sanitizer, unlike Synchronization.Mutex
                // on Linux, whose lock lives in the uninstrumented standard library.
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: strict),
        // Virtual time, a scripted token service and model checking for the core (like
        // ServiceLifecycleTestKit beside ServiceLifecycle).
        .target(
            name: "WAFTokenCoreTestKit",
            dependencies: ["WAFTokenCore", .product(name: "NIOConcurrencyHelpers", package: "swift-nio")],
            swiftSettings: strict),

        // The version the executables print and the package carries.
        .target(name: "WAFVersion", swiftSettings: strict),
        .target(name: "WAFEventLoopExecutor", dependencies: nio, swiftSettings: strict),
        // The runtime's conformance checks of a start, asked ahead on the idle core.
        .target(
            name: "WAFStartupWarmup",
            dependencies: nio + ["WAFDaemonTransport"], swiftSettings: strict),
        // A JSON document of any shape, read through FoundationEssentials' JSONDecoder.
        .target(name: "WAFJSON", swiftSettings: strict),
        // The token service's wire format and the proof-of-work solvers (SHA-256, PBKDF2, scrypt).
        .target(
            name: "WAFChallenge",
            dependencies: [
                // WAFTokenCore: the token's own rule for a usable value (a verify answer's token).
                "WAFJSON", "WAFTokenCore", "COpenSSL", "CLibrariesOnDemand", .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                // pthread-based locks, for the thread sanitizer (see WAFTokenCore).
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: strict),
        // The provider's fetcher over HTTP, to a real or the local token service, on AsyncHTTPClient.
        .target(
            name: "WAFTokenServiceHTTP",
            dependencies: [
                "WAFTokenCore", "WAFChallenge", logging, .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ] + nio,
            swiftSettings: strict),
        // The local token service: challenges, verify, tokens, a WAF-like protected resource,
        // fault injection and counters.
        .target(
            name: "WAFLocalTokenService",
            dependencies: [
                "WAFChallenge", logging, .product(name: "Crypto", package: "swift-crypto"), .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ] + nio,
            swiftSettings: strict),

        // The daemon's modules, lowest first; each imports only the ones above it that it names, and
        // scripts/check-imports.py holds every source file to this list (docs/architecture.md).
        //
        // HTTP/1.x heads, framing and chunks read strictly from raw bytes: what the proxy relays and
        // the fuzzer drives. Nothing of ours.
        .target(name: "WAFHTTPWire", dependencies: [.product(name: "NIOCore", package: "swift-nio")], swiftSettings: hotPath),
        // The proxy's event loop of its own (issue 39): epoll with timers and a wake-up from other
        // threads, non-blocking sockets that write with writev and follow backpressure, TLS client
        // sessions over libssl's memory BIOs. No HTTP, no NIO pipeline (its ByteBuffer only).
        .target(
            name: "WAFProxyLoop",
            dependencies: [
                "CEpoll", "CLibSSL", "CLibrariesOnDemand", .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: hotPath),
        // The other end of the loop's TLS client, in memory: a libssl server over a BIO pair, for
        // the loop's tests and the relay's fuzz target.
        .target(
            name: "WAFProxyLoopTestKit",
            dependencies: ["WAFProxyLoop", "CLibSSL", "CLibrariesOnDemand", .product(name: "NIOCore", package: "swift-nio")],
            swiftSettings: strict),
        // Listening and guarding connections: listeners (Unix, loopback, passed by systemd), accept
        // limits, peer credentials and access lists, timeouts, the one catalog of HTTP errors. NIO and
        // logging only.
        .target(name: "WAFDaemonTransport", dependencies: nio + [logging], swiftSettings: strict),
        // Telling programs that cannot change of a new token: a signal through a pidfd, a unit
        // reload (the service manager's plug-in makes the D-Bus call), a command with the token on
        // stdin; the exec supervisor's child. Nothing of ours below it, and no libsystemd.
        .systemLibrary(name: "CLinuxProcess"),
        .target(
            name: "WAFDelivery", dependencies: ["CLinuxProcess", .product(name: "NIOConcurrencyHelpers", package: "swift-nio")],
            swiftSettings: strict),
        // The configuration: the key table, the YAML file, loading by precedence, validation.
        .target(
            name: "WAFDaemonConfiguration",
            dependencies: [
                "WAFTokenCore", "WAFDelivery", "WAFHTTPWire", "CYAML", "CLibrariesOnDemand", logging,
                // No traits: its YAML trait brings Yams, and with it Foundation and ICU (about 45 MB of
                // a static binary); the file is read through libyaml instead (YAML/).
                .product(name: "Configuration", package: "swift-configuration"),
            ],
            swiftSettings: strict),
        // The running providers as the listeners see them: by name or domain, who may use each, the
        // forced-refresh limit, the proxy's status board.
        .target(
            name: "WAFProviderRegistry",
            dependencies: ["WAFTokenCore", "WAFDaemonTransport", .product(name: "NIOConcurrencyHelpers", package: "swift-nio")],
            swiftSettings: strict),
        // The token files, the cookie jars and the state files (atomic writes, retries).
        .target(
            name: "WAFTokenStorage",
            dependencies: [
                "WAFTokenCore", logging,
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            swiftSettings: strict),
        // The socket API: routes, the fast path, events, status, forward auth, metrics and probes.
        .target(
            name: "WAFSocketAPI",
            dependencies: ["WAFTokenCore", "WAFJSON", "WAFHTTPWire", "WAFDaemonTransport", "WAFProviderRegistry", logging] + nio,
            swiftSettings: strict),
        // The token-injecting proxy: one upstream per provider, challenges, replays, pools, TLS.
        .target(
            name: "WAFTokenProxy",
            dependencies: [
                "WAFTokenCore", "WAFHTTPWire", "WAFDaemonTransport", "WAFProviderRegistry", "WAFProxyLoop",
                .product(name: "Metrics", package: "swift-metrics"),
            ] + nio + [logging],
            swiftSettings: hotPath),
        // The token canary: asks the protected API with the token, and says when the web ACL no
        // longer accepts it (docs/canary.md).
        .target(
            name: "WAFTokenCanary",
            dependencies: [
                "WAFTokenCore", "WAFProviderRegistry", logging, .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"), .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"), .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: strict),
        // The daemon: the command, the providers' lives, reload, metrics, the services; the one
        // module that wires the others.
        .target(
            name: "WAFTokenDaemon",
            dependencies: [
                "WAFTokenCore", "WAFTokenServiceHTTP", "WAFChallenge", "WAFVersion", "WAFDaemonTransport", "WAFDaemonConfiguration",
                "WAFProviderRegistry", "WAFTokenStorage", "WAFSocketAPI", "WAFTokenProxy", "WAFDelivery", "WAFTokenCanary", "WAFServiceManager",
                "CLibrariesOnDemand", logging,
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ] + nio,
            swiftSettings: strict),
        // waf-tokend as a systemd service: sd_notify, the watchdog, socket activation, journald.
        // What the daemon and a service manager say to each other: below the daemon and the plug-in.
        .target(name: "WAFServiceManager", swiftSettings: strict),
        // The systemd plug-in: it implements WAFServiceManager's protocols; the executables join it
        // to the daemon, which knows nothing of it.
        .target(name: "WAFSystemd", dependencies: ["CSystemd", "CLibrariesOnDemand", "WAFServiceManager", logging], swiftSettings: strict),

        // A Swift client of the daemon's socket API, with the SDK's shape; and waf-tokenctl on it.
        // NIO alone: a local socket needs no HTTPS client, pool or crypto (README, "Sizes").
        .target(
            name: "WAFDaemonClient",
            dependencies: [
                "WAFJSON", .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: strict),
        .target(
            name: "WAFTokenCtl",
            dependencies: ["WAFDaemonClient", "WAFJSON", "WAFVersion", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            swiftSettings: strict),

        // Thin executables.
        .executableTarget(
            name: "waf-tokend",
            dependencies: [
                "WAFTokenDaemon", "WAFSystemd", "WAFServiceManager", "WAFLocalTokenService", "WAFEventLoopExecutor", "WAFVersion",
                "WAFStartupWarmup", logging,
            ],
            swiftSettings: strict),
        .executableTarget(name: "waf-tokenctl", dependencies: ["WAFTokenCtl", "WAFVersion"], swiftSettings: strict),
        .executableTarget(
            name: "waf-token-service",
            dependencies: ["WAFLocalTokenService", "WAFChallenge", "WAFVersion", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            swiftSettings: strict),

        // Benchmarks: proof of work against OpenSSL in C; a fleet of providers in virtual time; a relay sketch.
        .executableTarget(
            name: "waf-pow-bench",
            dependencies: [
                "WAFChallenge", .product(name: "Crypto", package: "swift-crypto"), .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            path: "Benchmarks/waf-pow-bench", swiftSettings: strict),
        .executableTarget(
            name: "waf-fleet-sim", dependencies: ["WAFTokenCore", "WAFTokenCoreTestKit"], path: "Benchmarks/waf-fleet-sim", swiftSettings: strict),
        // The proxy's relay on an epoll loop of its own, without NIO's pipeline: a measuring sketch.
        .executableTarget(
            name: "waf-relay-sketch",
            dependencies: ["WAFProxyLoop", "WAFHTTPWire", .product(name: "NIOCore", package: "swift-nio")],
            path: "Benchmarks/waf-relay-sketch", swiftSettings: strict),

        // What the test targets share: child processes of our executables, certificates, raw
        // sockets, a daemon in front of a local token service.
        .target(
            name: "WAFTestSupport",
            dependencies: [
                "WAFLocalTokenService", "WAFDaemonClient", "WAFChallenge", "WAFJSON", "WAFTestTraits",
                .product(name: "AsyncHTTPClient", package: "async-http-client"), .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ] + nio,
            swiftSettings: strict),
        // waf-tokend whose provider wedges on purpose, for the watchdog tests only; never installed.
        .executableTarget(
            name: "waf-tokend-wedge", dependencies: ["WAFTokenDaemon", "WAFSystemd", "WAFServiceManager", "WAFTokenCore", logging],
            path: "Tests/Executables/waf-tokend-wedge",
            swiftSettings: strict),

        // Where tests run: off the concurrency pool, watched for a blocked pool, within a bound
        // (WAFTestTraits/OffPool.swift). Every suite wears `.offPool`; only test targets use it.
        .target(
            name: "WAFTestTraits", dependencies: [.product(name: "NIOConcurrencyHelpers", package: "swift-nio")], swiftSettings: strict),

        // One test target per library module.
        .testTarget(
            name: "WAFTokenCoreTests",
            dependencies: [
                "WAFTestTraits", "WAFTokenCore", "WAFTokenCoreTestKit", logging, .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: strict),
        .testTarget(
            name: "WAFChallengeTests",
            dependencies: [
                "WAFTestTraits", "WAFChallenge", "WAFJSON", "WAFTestSupport", .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: strict),
        .testTarget(
            name: "WAFTokenServiceHTTPTests",
            dependencies: [
                "WAFTestTraits",
                "WAFTokenServiceHTTP", "WAFTokenCore", "WAFChallenge", "WAFLocalTokenService", "WAFTestSupport", "waf-token-service",
                .product(name: "AsyncHTTPClient", package: "async-http-client"), .product(name: "Crypto", package: "swift-crypto"),
            ] + nio,
            swiftSettings: strict),
        .testTarget(
            name: "WAFLocalTokenServiceTests",
            dependencies: [
                "WAFTestTraits", "WAFLocalTokenService", "WAFChallenge", "WAFJSON", "WAFTestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
            ] + nio,
            swiftSettings: strict),
        .testTarget(
            name: "WAFHTTPWireTests", dependencies: ["WAFTestTraits", "WAFHTTPWire"] + nio, swiftSettings: strict),
        .testTarget(
            name: "WAFProxyLoopTests",
            dependencies: ["WAFTestTraits", "WAFTestSupport", "WAFProxyLoop", "WAFProxyLoopTestKit", "CEpoll", "CLibSSL"] + nio,
            swiftSettings: strict),
        .testTarget(
            name: "WAFDaemonTransportTests", dependencies: ["WAFTestTraits", "WAFDaemonTransport", logging] + nio, swiftSettings: strict),
        .testTarget(
            name: "WAFDaemonConfigurationTests",
            dependencies: [
                "WAFTestTraits", "WAFDaemonConfiguration", "WAFTokenCore", "WAFTestSupport",
                // The command line's options come from the key table: parsed as the daemon parses them.
                "WAFTokenDaemon", .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strict),
        .testTarget(
            name: "WAFSocketAPITests",
            dependencies: [
                "WAFTestTraits", "WAFSocketAPI", "WAFDaemonTransport", "WAFProviderRegistry", "WAFTokenCore", "WAFTokenCoreTestKit", logging,
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ] + nio,
            swiftSettings: strict),
        .testTarget(
            name: "WAFTokenStorageTests",
            dependencies: ["WAFTestTraits", "WAFTokenStorage", "WAFTokenCore", logging, .product(name: "SystemPackage", package: "swift-system")],
            swiftSettings: strict),
        .testTarget(
            name: "WAFTokenProxyTests",
            dependencies: [
                "WAFTestTraits", "WAFTestSupport", "WAFTokenProxy", "WAFHTTPWire", "WAFDaemonConfiguration", "WAFDaemonTransport",
                "WAFProviderRegistry", "WAFProxyLoop", "CEpoll",
                "WAFTokenCore",
                "WAFTokenCoreTestKit", logging, .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ] + nio,
            swiftSettings: strict),
        // The daemon end to end: the real waf-tokend and local token services as child processes.
        .testTarget(
            name: "WAFTokenDaemonTests",
            dependencies: [
                "WAFTestTraits",
                "WAFTokenDaemon", "WAFTokenCore", "WAFChallenge", "WAFJSON", "WAFLocalTokenService", "WAFDaemonClient", "WAFTestSupport",
                "WAFDaemonTransport", "WAFProviderRegistry", "WAFServiceManager",
                "waf-tokend", "waf-tokenctl", "waf-token-service", logging,
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"), .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Prometheus", package: "swift-prometheus"), .product(name: "Metrics", package: "swift-metrics"),
            ] + nio,
            swiftSettings: strict),
        .testTarget(
            name: "WAFSystemdTests",
            dependencies: [
                "WAFTestTraits", "WAFSystemd", "WAFTokenDaemon", "WAFChallenge", "WAFJSON", "WAFTestSupport", "waf-tokend", "waf-tokend-wedge",
                "waf-tokenctl", "waf-token-service", "CLibrariesOnDemand",
            ],
            swiftSettings: strict),
        .testTarget(
            name: "WAFDaemonClientTests",
            dependencies: ["WAFTestTraits", "WAFDaemonClient", "WAFTestSupport", "waf-tokend", "waf-token-service"],
            swiftSettings: strict),
        // Faults, kills, signal storms, floods and a soak against the real daemon; bounded here,
        // full with WAF_RELIABILITY=full (make test-reliability).
        .testTarget(
            name: "WAFReliabilityTests",
            dependencies: ["WAFTestTraits", "WAFTestSupport", "WAFChallenge", "WAFJSON", "WAFLocalTokenService", "waf-tokend", "waf-token-service"],
            swiftSettings: strict),
        // The Debian package in a booted systemd, the container image, the Kubernetes manifests: after
        // make deb and make image (make test-packages).
        .testTarget(
            name: "WAFPackageTests", dependencies: ["WAFTestTraits", "WAFTestSupport", "WAFDaemonConfiguration", "WAFJSON", "waf-token-service"],
            swiftSettings: strict),
        .testTarget(
            name: "WAFTokenCtlTests",
            dependencies: [
                "WAFTestTraits", "WAFTokenCtl", "WAFTestSupport", "waf-tokend", "waf-tokenctl", "waf-token-service",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strict),
        .testTarget(name: "WAFTestTraitsTests", dependencies: ["WAFTestTraits"], swiftSettings: strict),
        .testTarget(
            name: "WAFTokenCanaryTests",
            dependencies: ["WAFTestTraits", "WAFTokenCanary", .product(name: "AsyncHTTPClient", package: "async-http-client")],
            swiftSettings: strict),
        .testTarget(
            name: "WAFDeliveryTests",
            dependencies: [
                "WAFTestTraits", "WAFDelivery", "WAFTokenCore", "WAFTokenCoreTestKit", .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict),
        .testTarget(name: "WAFJSONTests", dependencies: ["WAFTestTraits", "WAFJSON"], swiftSettings: strict),
        .testTarget(
            name: "WAFProviderRegistryTests",
            dependencies: [
                "WAFTestTraits", "WAFProviderRegistry", "WAFDaemonTransport", "WAFTokenCore", "WAFTokenCoreTestKit", logging,
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: strict),
        .testTarget(name: "WAFServiceManagerTests", dependencies: ["WAFTestTraits", "WAFServiceManager"], swiftSettings: strict),
        .testTarget(
            name: "WAFStartupWarmupTests",
            dependencies: ["WAFTestTraits", "WAFStartupWarmup", "WAFTokenDaemon", .product(name: "NIOCore", package: "swift-nio")],
            swiftSettings: strict),
        .testTarget(name: "WAFEventLoopExecutorTests", dependencies: ["WAFTestTraits", "WAFEventLoopExecutor"] + nio, swiftSettings: strict),
        .testTarget(
            name: "WAFVersionTests",
            dependencies: ["WAFTestTraits", "WAFVersion", "WAFTestSupport", "waf-tokend", "waf-tokenctl", "waf-token-service"],
            swiftSettings: strict),
    ],
    swiftLanguageModes: [.v6]
)
