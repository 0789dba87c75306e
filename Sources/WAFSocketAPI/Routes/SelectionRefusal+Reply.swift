import WAFDaemonTransport
import WAFProviderRegistry

extension HTTPReply {
    /// How the API words a request that means no provider its peer may use (MULTI-2, TENANT-7):
    /// the registry decides, the API answers.
    init(_ refusal: SelectionRefusal) {
        func named(_ choices: [String]) -> String { choices.isEmpty ? "" : " (providers: \(choices.joined(separator: ", ")))" }
        switch refusal {
        case .bothSelectors:
            self = .error(.badRequest, "badRequest", "ask for one provider: ?provider=NAME or ?domain=HOST, not both")
        case .selectorRequired(let choices):
            self = .error(
                .badRequest, "providerRequired", "this daemon runs several providers: ask with ?provider=NAME or ?domain=HOST\(named(choices))")
        case .forbidden(let name):
            self = .error(
                .forbidden, "forbidden",
                "this user may not use \(name.map { "provider \($0)" } ?? "the provider this request means") (its allowedUsers, allowedGroups)")
        case .noneVisible(let selector, let choices):
            self = .error(
                .forbidden, "forbidden", "no provider this user may use matches this \(selector) (allowedUsers, allowedGroups)\(named(choices))")
        case .unknownProvider(let name, let choices):
            self = .error(.notFound, "unknownProvider", "no provider named \(name.prefix(64).debugDescription)\(named(choices))")
        case .unknownDomain(let domain, let choices):
            self = .error(.notFound, "unknownDomain", "no provider covers \(domain.prefix(256).debugDescription)\(named(choices))")
        }
    }
}
