/// The name of the provider that the top-level `applicationIntegrationUrl` and `domainName` make,
/// where a daemon runs several. In the lowest module because storage (the state file's name), the
/// registry (the provider a request without a selector gets) and the configuration all need it,
/// and none of them may import another for one constant.
public enum WAFProviderName {
    public static let defaultName = "default"
}
