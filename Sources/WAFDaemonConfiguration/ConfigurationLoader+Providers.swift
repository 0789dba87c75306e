import WAFTokenCore

/// The providers of a configuration (docs/rules.md, MULTI-1): the `default` one the top-level
/// `applicationIntegrationUrl` and `domainName` make, and every entry under `providers:` (in the
/// file, `--providers.NAME.KEY` options and `WAF_TOKEND_PROVIDERS_NAME_KEY` variables), each key
/// a provider leaves out taken from the top level when it is an SDK key.
extension ConfigurationLoader {
    struct TopLevel {
        /// The SDK keys given at the top level, checked, and where each came from.
        var sdk: [String: WAFSettingValue]
        var origins: [String: String]
        /// The daemon's keys and the default provider's own keys, checked.
        var values: [String: CheckedValue]
    }

    static func providers(
        _ top: TopLevel, sources: ConfigurationSources, file: ConfigurationFile, refused: Set<String>
    ) -> (providers: [ProviderConfiguration], issues: [WAFConfigurationIssue]) {
        var issues: [WAFConfigurationIssue] = []
        let commandLine = providerOptions(sources.commandLine, issues: &issues)
        let environment = ProviderName.environmentValues(sources.environment)
        for variable in ProviderName.unknownVariables(sources.environment) {
            issues.append(WAFConfigurationIssue(key: variable, value: nil, problem: "names no key a provider has", allowed: providerKeyList))
        }
        let named = Set(file.providers.keys).union(environment.keys).union(commandLine.keys)
        for name in named.sorted() where !ProviderName.isValid(name) {
            issues.append(
                WAFConfigurationIssue(key: "providers.\(name)", value: nil, problem: "is not a provider name", allowed: ProviderName.allowed))
        }
        let topIdentity =
            top.sdk[WAFConfigurationKey.applicationIntegrationUrl.rawValue] != nil && top.sdk[WAFConfigurationKey.domainName.rawValue] != nil
        var providers: [ProviderConfiguration] = []
        if topIdentity || named.isEmpty {
            // The top level's provider; with neither it nor `providers`, its "is required" says what is missing.
            if named.contains(WAFProviderName.defaultName) {
                issues.append(
                    WAFConfigurationIssue(
                        key: "providers.default", value: nil,
                        problem: "is the provider the top-level applicationIntegrationUrl and domainName make; name this one otherwise",
                        allowed: ProviderName.allowed))
            }
            let values = top.values.filter { Keys.byName[$0.key]?.perProvider == true }
            if let provider = provider(
                WAFProviderName.defaultName, sdk: top.sdk, origins: top.origins, values: values, keyPrefix: "", refused: refused, issues: &issues)
            {
                providers.append(provider)
            }
        }
        for name in named.sorted() where ProviderName.isValid(name) && !(topIdentity && name == WAFProviderName.defaultName) {
            var sdk = top.sdk, origins = top.origins
            var values: [String: CheckedValue] = [:]
            let prefix = "providers.\(name)."
            for spec in Keys.all where spec.perProvider {
                let given: (SettingCheck.Given, String)? =
                    commandLine[name]?[spec.name].map { (.text($0), spec.optionName(provider: name)) }
                    ?? environment[name]?[spec.name].map { (.text($0.text), $0.variable) }
                    ?? file.providers[name]?[spec.name].flatMap { node in
                        spec.isOptional && node.isNull ? nil : (.yaml(node), "\(prefix)\(spec.name) in \(file.path)")
                    }
                guard let (value, origin) = given else { continue }
                switch SettingCheck.check(value, for: spec) {
                case .failure(let problem):
                    issues.append(
                        WAFConfigurationIssue(
                            key: prefix + spec.name, value: value.rendered, problem: "\(problem.text) (from \(origin))", allowed: spec.allowed))
                case .success(.provider(let setting)):
                    sdk[spec.name] = setting
                    origins[spec.name] = origin
                case .success(.daemon(let checked)):
                    values[spec.name] = checked
                case .success(.unset):
                    break
                }
            }
            if let provider = provider(name, sdk: sdk, origins: origins, values: values, keyPrefix: prefix, refused: refused, issues: &issues) {
                providers.append(provider)
            }
        }
        issues += conflicts(providers) + tenantIssues(providers, top: top.values)
        return (providers, issues)
    }

    /// One provider's SDK configuration checked (CFG-1…10) and its proxy keys checked together.
    private static func provider(
        _ name: String, sdk: [String: WAFSettingValue], origins: [String: String], values: [String: CheckedValue], keyPrefix: String,
        refused: Set<String>, issues: inout [WAFConfigurationIssue]
    ) -> ProviderConfiguration? {
        do {
            let configuration = try WAFConfiguration(settings: sdk)
            let proxy =
                (ProxyKeys.issues(values, domainName: configuration.domainName) + ProxyKeys.canaryIssues(values, domainName: configuration.domainName))
                .map { $0.prefixed(keyPrefix) }
            issues += proxy
            return proxy.isEmpty ? ProviderConfiguration(name: name, configuration: configuration, values: values) : nil
        } catch {
            // A key refused above is not also "required".
            issues += error.issues.filter { !refused.contains(keyPrefix + $0.key) && !(keyPrefix.isEmpty && refused.contains($0.key)) }.map { issue in
                let origin = origins[issue.key].map { " (from \($0))" } ?? ""
                return WAFConfigurationIssue(key: keyPrefix + issue.key, value: issue.value, problem: issue.problem + origin, allowed: issue.allowed)
            }
            return nil
        }
    }

    /// What only the set can get wrong: two providers with one identity, one token file or one
    /// proxy listener between two.
    private static func conflicts(_ providers: [ProviderConfiguration]) -> [WAFConfigurationIssue] {
        var issues: [WAFConfigurationIssue] = []
        func key(_ provider: ProviderConfiguration, _ name: String) -> String { provider.isDefault ? name : "providers.\(provider.name).\(name)" }
        // By what they would share, the providers so far: linear in the providers (a hundred of
        // them compared pairwise, each identity built anew, cost start-up milliseconds).
        var identities: [WAFTokenIdentity: [String]] = [:], files: [String: [String]] = [:], listens: [String: [String]] = [:]
        for provider in providers {
            let identity = provider.identity
            for earlier in identities[identity, default: []] {
                issues.append(
                    WAFConfigurationIssue(
                        key: key(provider, "domainName"), value: provider.domainName.debugDescription,
                        problem:
                            "gives provider \(provider.name) the identity of provider \(earlier) (the same applicationIntegrationUrl and domainName)",
                        allowed: "one provider per web ACL and domain"))
            }
            identities[identity, default: []].append(provider.name)
            if let file = provider[Keys.sinksTokenFile] {
                for earlier in files[file, default: []] {
                    issues.append(
                        WAFConfigurationIssue(
                            key: key(provider, "sinks.tokenFile"), value: file.debugDescription, problem: "is provider \(earlier)'s token file too",
                            allowed: "a token file of its own"))
                }
                files[file, default: []].append(provider.name)
            }
            if let listen = provider[Keys.proxyListen] {
                let address = listen.description
                for earlier in listens[address, default: []] {
                    issues.append(
                        WAFConfigurationIssue(
                            key: key(provider, "proxy.listen"), value: address.debugDescription,
                            problem: "is where provider \(earlier)'s proxy listens too", allowed: "an address of its own"))
                }
                listens[address, default: []].append(provider.name)
            }
        }
        return issues
    }

    /// `--providers.NAME.KEY` options, by name and key; an option for no provider key is refused.
    private static func providerOptions(_ commandLine: [String: String], issues: inout [WAFConfigurationIssue]) -> [String: [String: String]] {
        var options: [String: [String: String]] = [:]
        for (option, value) in commandLine where option.hasPrefix("providers.") {
            let rest = option.dropFirst("providers.".count)
            guard let dot = rest.firstIndex(of: "."), Keys.perProviderByName[String(rest[rest.index(after: dot)...])] != nil else {
                issues.append(WAFConfigurationIssue(key: "--" + option, value: nil, problem: "names no key a provider has", allowed: providerKeyList))
                continue
            }
            options[String(rest[..<dot]), default: [:]][String(rest[rest.index(after: dot)...])] = value
        }
        return options
    }

    private static var providerKeyList: String {
        Keys.all.filter(\.perProvider).map(\.name).joined(separator: ", ")
    }
}

extension WAFConfigurationIssue {
    func prefixed(_ prefix: String) -> WAFConfigurationIssue {
        prefix.isEmpty ? self : WAFConfigurationIssue(key: prefix + key, value: value, problem: problem, allowed: allowed)
    }
}
