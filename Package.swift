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
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-crypto.git", "3.0.0"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.6.3"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.94.0"),
    ],
    targets: [
        // Public Suffix List through Debian's libpsl (libpsl-dev, publicsuffix).
        .systemLibrary(
            name: "CLibPSL",
            pkgConfig: "libpsl",
            providers: [.apt(["libpsl-dev", "publicsuffix"])]
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
            dependencies: ["WAFTokenCore"],
            swiftSettings: strict
        ),

        .testTarget(
            name: "WAFTokenCoreTests",
            dependencies: [
                "WAFTokenCore", "WAFTokenCoreTestKit",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
    ],
    swiftLanguageModes: [.v6]
)
