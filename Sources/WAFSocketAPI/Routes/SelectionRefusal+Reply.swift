import WAFDaemonTransport
import WAFProviderRegistry

extension DaemonError {
    /// A request that means no provider its peer may use (MULTI-2, TENANT-7): the registry
    /// decides, the catalog words it.
    init(_ refusal: SelectionRefusal) {
        self =
            switch refusal {
            case .bothSelectors: .bothSelectors
            case .selectorRequired(let choices): .providerRequired(choices: choices)
            case .forbidden(let name): .providerForbidden(name: name)
            case .noneVisible(let selector, let choices): .noneVisible(selector: selector, choices: choices)
            case .unknownProvider(let name, let choices): .unknownProvider(name: name, choices: choices)
            case .unknownDomain(let domain, let choices): .unknownDomain(domain: domain, choices: choices)
            }
    }
}

extension HTTPReply {
    init(_ refusal: SelectionRefusal) {
        self = DaemonError(refusal).reply
    }
}
