// swift-tools-version: 6.2
// libFuzzer targets for waf-tokend, a package of its own that depends on the project by path:
//     swift build --package-path Fuzz --sanitize=fuzzer --sanitize=address
// `make fuzz` builds and runs them (scripts/fuzz.sh). Each target asserts the properties that
// matter, not only "does not crash", and every crash found becomes a regression test.
import Foundation
import PackageDescription

// A path dependency is named after its folder, which is whatever the clone is called.
let project = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().lastPathComponent

func fuzzTarget(_ name: String, _ dependencies: [String]) -> Target {
    .executableTarget(
        name: name,
        dependencies: ["FuzzSupport"] + dependencies.map { .product(name: $0, package: project) },
        path: "Sources/\(name)")
}

let package = Package(
    name: "waf-tokend-fuzz",
    dependencies: [.package(path: "..")],
    targets: [
        .target(name: "FuzzSupport", path: "Sources/FuzzSupport"),
        fuzzTarget(
            "fuzz-socket", ["WAFSocketAPI", "WAFDaemonTransport", "WAFProviderRegistry", "WAFTokenDaemon", "WAFTokenCore", "WAFTokenCoreTestKit"]),
        fuzzTarget("fuzz-config", ["WAFDaemonConfiguration", "WAFTokenCore"]),
        fuzzTarget("fuzz-challenge", ["WAFChallenge"]),
        fuzzTarget("fuzz-state", ["WAFTokenStorage", "WAFTokenCore"]),
        fuzzTarget("fuzz-cookie-path", ["WAFTokenCore"]),
        fuzzTarget("fuzz-sse", ["WAFDaemonClient"]),
        fuzzTarget("fuzz-local-service", ["WAFLocalTokenService", "WAFChallenge"]),
        fuzzTarget("fuzz-relay", ["WAFHTTPWire", "WAFTokenProxy", "WAFDaemonConfiguration", "WAFProxyLoop", "WAFProxyLoopTestKit"]),
    ],
    swiftLanguageModes: [.v6]
)
