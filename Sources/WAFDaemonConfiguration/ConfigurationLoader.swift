import Configuration
import WAFTokenCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Reads and checks the whole configuration: command line, then environment (both through
/// swift-configuration's providers), then the YAML file, then defaults. A wrong type, a wrong
/// shape or an out-of-range value is refused with key, value, what is allowed and where it came
/// from (CFG-9), never replaced by a default; every problem is reported at once. The providers
/// are read in `ConfigurationLoader+Providers.swift`.
public enum ConfigurationLoader {
    public static func load(_ sources: ConfigurationSources) -> Result<DaemonConfiguration, WAFConfigurationError> {
        load(sources, file: ConfigurationFile(path: sources.filePath, required: sources.file != nil))
    }

    static func load(_ sources: ConfigurationSources, file: ConfigurationFile) -> Result<DaemonConfiguration, WAFConfigurationError> {
        if file.unusable { return .failure(WAFConfigurationError(issues: file.issues)) }
        var issues = file.issues
        let commandLine = InMemoryProvider(name: "command line", values: inMemory(sources.commandLine))
        // Every key's variable starts with WAF_TOKEND_: without one, the environment is not asked
        // for each key (the provider turns each key into a variable name to look it up, a
        // measurable part of start-up).
        let environment =
            sources.environment.keys.contains { $0.hasPrefix("WAF_TOKEND_") }
            ? EnvironmentVariablesProvider(environmentVariables: sources.environment).prefixKeys(with: ["wafTokend"]) : nil
        let fallbacks = InMemoryProvider(name: "demo mode", values: inMemory(sources.fallbacks))

        var provider: [String: WAFSettingValue] = [:]
        var origins: [String: String] = [:]
        var values: [String: CheckedValue] = [:]
        for spec in Keys.all where spec.topLevel {
            guard let (given, origin) = lookup(spec, file: file, providers: (commandLine, environment, fallbacks), environment: sources.environment)
            else {
                continue
            }
            let checked = SettingCheck.check(given, for: spec)
            switch checked {
            case .failure(let problem):
                issues.append(
                    WAFConfigurationIssue(key: spec.name, value: given.rendered, problem: "\(problem.text) (from \(origin))", allowed: spec.allowed))
            case .success(.provider(let setting)):
                provider[spec.name] = setting
                origins[spec.name] = origin
            case .success(.daemon(let value)):
                values[spec.name] = value
            case .success(.unset):
                break
            }
        }
        let refused = Set(issues.map(\.key))
        let top = TopLevel(sdk: provider, origins: origins, values: values)
        let (providers, providerIssues) = Self.providers(top, sources: sources, file: file, refused: refused)
        issues += providerIssues.filter { !refused.contains($0.key) }
        let proxyEnvironment = sources.environment.filter { DaemonConfiguration.proxyVariables.contains($0.key) }
        let configuration = DaemonConfiguration(providers: providers, topLevelSDK: provider, values: values, proxyEnvironment: proxyEnvironment)
        issues += egressIssues(configuration)
        guard issues.isEmpty, !providers.isEmpty else { return .failure(WAFConfigurationError(issues: order(issues))) }
        return .success(configuration)
    }

    /// The value that decides `spec`, and where it came from: the first source that holds it.
    private static func lookup(
        _ spec: KeySpec, file: ConfigurationFile,
        providers: (commandLine: InMemoryProvider, environment: KeyMappingProvider<EnvironmentVariablesProvider>?, fallbacks: InMemoryProvider),
        environment: [String: String]
    ) -> (SettingCheck.Given, String)? {
        let key = AbsoluteConfigKey(spec.name.split(separator: ".").map(String.init))
        func text(_ provider: some ConfigProvider) -> String? {
            guard case .string(let text)? = try? provider.value(forKey: key, type: .string).value?.content, !text.isEmpty else { return nil }
            return text
        }
        if let given = text(providers.commandLine) { return (.text(given), spec.optionName) }
        if let environment = providers.environment, let given = text(environment) { return (.text(given), spec.environmentName) }
        // Empty in the file, an optional key is not set there: lower sources may still set it.
        if let node = file.values[spec.name], !(spec.isOptional && node.isNull) {
            return (.yaml(node), "\(spec.name) in \(file.path)")
        }
        if let given = text(providers.fallbacks) { return (.text(given), "demo mode") }
        // systemd's StateDirectory= says where state belongs when nothing else does.
        if spec.name == Keys.stateDirectory.spec.name, let state = environment["STATE_DIRECTORY"]?.split(separator: ":").first {
            return (.text(String(state)), "$STATE_DIRECTORY")
        }
        return nil
    }

    private static func inMemory(_ raw: [String: String]) -> [AbsoluteConfigKey: ConfigValue] {
        var values: [AbsoluteConfigKey: ConfigValue] = [:]
        for (key, text) in raw {
            values[AbsoluteConfigKey(key.split(separator: ".").map(String.init))] = ConfigValue(.string(text), isSecret: false)
        }
        return values
    }

    /// File problems first, then the keys in the table's order.
    private static func order(_ issues: [WAFConfigurationIssue]) -> [WAFConfigurationIssue] {
        let position = Dictionary(uniqueKeysWithValues: Keys.all.enumerated().map { ($0.element.name, $0.offset) })
        return issues.enumerated().sorted { a, b in
            let (pa, pb) = (position[a.element.key] ?? -1, position[b.element.key] ?? -1)
            return pa == pb ? a.offset < b.offset : pa < pb
        }.map(\.element)
    }
}

extension ConfigurationLoader {
    /// A proxy the environment names that the daemon cannot use, for a URL a provider asks
    /// (EGRESS-1): refused at start, not found at the first fetch.
    static func egressIssues(_ configuration: DaemonConfiguration) -> [WAFConfigurationIssue] {
        var issues: [WAFConfigurationIssue] = []
        for provider in configuration.providers {
            let prefix = provider.isDefault ? "" : "providers.\(provider.name)."
            for (what, url) in configuration.outboundURLs(of: provider) {
                let issue: WAFConfigurationIssue
                switch configuration.egress(of: provider, for: url) {
                case .failure(let problem):
                    issue = WAFConfigurationIssue(
                        key: prefix + Keys.egressProxy.spec.name, value: nil, problem: "is unset, and for the \(what): \(problem.description)",
                        allowed: Keys.egressProxy.spec.allowed)
                case .success(let egress):
                    // AsyncHTTPClient (the token service's and the canary's client) checks a
                    // certificate named by an address against the address it connected to: through
                    // a proxy, the proxy's, which never matches. The proxy's own loop checks it right.
                    guard case .proxy = egress.route, what != "proxy upstream", let host = URLComponents(string: url)?.host,
                        url.lowercased().hasPrefix("https://"), WAFHost.isIPLiteral(host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host)
                    else { continue }
                    issue = WAFConfigurationIssue(
                        key: prefix + Keys.egressProxy.spec.name, value: egress.label.debugDescription,
                        problem:
                            "cannot carry https to the \(what) at the address \(host): its certificate cannot be checked through a forward proxy; name it by its DNS name",
                        allowed: Keys.egressProxy.spec.allowed)
                }
                if !issues.contains(where: { $0.description == issue.description }) { issues.append(issue) }
            }
            // A password file others may read is found now, not when the first request would send it.
            if let path = configuration.inherited(Keys.egressProxyCredentialsFile, for: provider),
                case .failure(let problem) = ProxyCredentials.read(path)
            {
                let issue = WAFConfigurationIssue(
                    key: Keys.egressProxyCredentialsFile.spec.name, value: path.debugDescription, problem: problem.description,
                    allowed: ProxyCredentials.allowed)
                if !issues.contains(where: { $0.description == issue.description }) { issues.append(issue) }
            }
        }
        return issues
    }
}
