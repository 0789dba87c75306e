// swift-tools-version: 6.2
import PackageDescription

/// Every target of ours is built in Swift 6 mode with warnings as errors: "no warnings" is a build
/// failure, not a convention.
let strict: [SwiftSetting] = [
    .treatAllWarnings(as: .error)
]

let package = Package(
    name: "waf-tokend",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "WAFTokenCore", targets: ["WAFTokenCore"]),
        .library(name: "WAFTokenCoreTestKit", targets: ["WAFTokenCoreTestKit"]),
        .library(name: "WAFChallenge", targets: ["WAFChallenge"]),
        .library(name: "WAFTokenServiceHTTP", targets: ["WAFTokenServiceHTTP"]),
        .library(name: "WAFLocalTokenService", targets: ["WAFLocalTokenService"]),
        .library(name: "WAFTokenDaemon", targets: ["WAFTokenDaemon"]),
        .library(name: "WAFTokenClient", targets: ["WAFTokenClient"]),
        .executable(name: "waf-tokend", targets: ["waf-tokend"]),
        .executable(name: "waf-tokenctl", targets: ["waf-tokenctl"]),
        .executable(name: "waf-token-service", targets: ["waf-token-service"]),
        .executable(name: "waf-pow-bench", targets: ["waf-pow-bench"]),
        .executable(name: "waf-fleet-sim", targets: ["waf-fleet-sim"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-crypto.git", "3.0.0"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.6.3"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.94.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.34.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-configuration.git", from: "1.0.0", traits: ["YAML"]),
        .package(url: "https://github.com/jpsim/Yams.git", "5.4.0"..<"7.0.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.7.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.0.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.8.0"),
        .package(url: "https://github.com/apple/swift-system.git", from: "1.5.0"),
    ],
    targets: [
        // Public Suffix List through Debian's libpsl (libpsl-dev, publicsuffix).
        .systemLibrary(
            name: "CLibPSL",
            pkgConfig: "libpsl",
            providers: [.apt(["libpsl-dev", "publicsuffix"])]
        ),

        // sd_notify, the watchdog, socket activation and the journal, from Debian's libsystemd-dev.
        .systemLibrary(
            name: "CSystemd",
            pkgConfig: "libsystemd",
            providers: [.apt(["libsystemd-dev"])]
        ),

        // The SDK core: configuration, token, provider, retry and lifecycle rules, cookies.
        // No I/O of its own: the token service and time come in through protocols.
        .target(
            name: "WAFTokenCore",
            dependencies: [
                "CLibPSL",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                // pthread-based locks: visible to the thread sanitizer, unlike Synchronization.Mutex
                // on Linux, whose lock lives in the uninstrumented standard library.
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),

        // Virtual time for the core, beside the library (like ServiceLifecycleTestKit).
        .target(
            name: "WAFTokenCoreTestKit",
            dependencies: [
                "WAFTokenCore",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),

        // The token service's wire format and the proof-of-work solvers (SHA-256, PBKDF2, scrypt).
        .target(
            name: "WAFChallenge",
            dependencies: [
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: strict
        ),

        // The provider's client to a real (or the local) token service, on AsyncHTTPClient.
        .target(
            name: "WAFTokenServiceHTTP",
            dependencies: [
                "WAFTokenCore", "WAFChallenge",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),

        // The local token service: challenges, verify, tokens, a WAF-like protected resource,
        // fault injection and counters.
        .target(
            name: "WAFLocalTokenService",
            dependencies: [
                "WAFChallenge",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),

        .executableTarget(
            name: "waf-token-service",
            dependencies: [
                "WAFLocalTokenService",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strict
        ),

        // The sidecar: configuration, the socket API, signals, sinks, state, demo mode.
        .target(
            name: "WAFTokenDaemon",
            dependencies: [
                "WAFTokenCore", "WAFTokenServiceHTTP", "WAFLocalTokenService", "WAFChallenge",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),

        // A Swift client of the daemon's socket API, with the SDK's shape; and waf-tokenctl on it.
        .target(
            name: "WAFTokenClient",
            dependencies: [
                "WAFChallenge",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "WAFTokenCtl",
            dependencies: [
                "WAFTokenClient", "WAFChallenge",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strict
        ),

        // waf-tokend as a systemd service: the daemon's notifier, socket activation, journald logging.
        .target(
            name: "WAFSystemd",
            dependencies: [
                "CSystemd", "WAFTokenDaemon",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),

        .executableTarget(name: "waf-tokend", dependencies: ["WAFTokenDaemon", "WAFSystemd"], swiftSettings: strict),
        .executableTarget(name: "waf-tokenctl", dependencies: ["WAFTokenCtl"], swiftSettings: strict),

        // Proof-of-work speed against Python's hashlib (OpenSSL), measured in the same run.
        .executableTarget(
            name: "waf-pow-bench",
            dependencies: ["WAFChallenge"],
            path: "Benchmarks/waf-pow-bench",
            swiftSettings: strict
        ),

        // 10,000 provider machines on one virtual clock: what a fleet asks of the token service.
        .executableTarget(
            name: "waf-fleet-sim",
            dependencies: ["WAFTokenCore", "WAFTokenCoreTestKit"],
            path: "Benchmarks/waf-fleet-sim",
            swiftSettings: strict
        ),

        .testTarget(
            name: "WAFTokenCoreTests",
            dependencies: [
                "WAFTokenCore", "WAFTokenCoreTestKit",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        // What the test targets share: real child processes of our executables, certificates, raw sockets.
        .target(
            name: "WAFTestSupport",
            dependencies: [
                "WAFLocalTokenService", "WAFTokenClient",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "Tests/WAFTestSupport",
            swiftSettings: strict
        ),

        .testTarget(
            name: "WAFTokenServiceTests",
            dependencies: [
                "WAFTokenCore", "WAFChallenge", "WAFTokenServiceHTTP", "WAFLocalTokenService", "WAFTestSupport",
                // Run as a child process by the end-to-end tests: built before them.
                "waf-token-service",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "WAFTokenDaemonTests",
            dependencies: [
                "WAFTokenDaemon", "WAFTokenClient", "WAFTokenCtl", "WAFTokenCore", "WAFLocalTokenService", "WAFChallenge",
                "WAFTestSupport", "WAFSystemd",
                "waf-tokend", "waf-tokenctl", "waf-token-service",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
    ],
    swiftLanguageModes: [.v6]
)
