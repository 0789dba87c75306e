import FuzzSupport
import WAFTokenCore

@testable import WAFDaemonConfiguration

// Configuration loading: YAML bytes and environment values. Properties: nothing traps; the result
// is a configuration or a list of problems, each one line; a configuration's effective YAML loads
// back as the same configuration.

private let names = Keys.all.map(\.environmentName)

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafeRawPointer, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    var environment: [String: String] = [:]
    for _ in 0..<input.choose(4) {
        environment[names[input.choose(names.count)]] = String(decoding: input.take(input.choose(40)), as: UTF8.self)
    }
    let sources = ConfigurationSources(environment: environment, file: "fuzz.yaml")
    switch ConfigurationLoader.load(sources, file: ConfigurationFile(path: "fuzz.yaml", bytes: input.rest())) {
    case .failure(let error):
        for issue in error.issues where issue.description.contains("\n") { violated("a problem of more than one line: \(issue.description)") }
    case .success(let configuration):
        let again = ConfigurationLoader.load(
            ConfigurationSources(file: "again.yaml"), file: ConfigurationFile(path: "again.yaml", bytes: Array(configuration.effectiveYAML.utf8)))
        guard case .success(let reloaded) = again, reloaded.effectiveYAML == configuration.effectiveYAML else {
            violated("the effective configuration does not load back: \(configuration.effectiveYAML)")
        }
    }
    return 0
}
