/// ServiceLifecycle names each service `"\(service)"` as the group is made. Without a description
/// of its own, that is reflection over every stored property, each step a dynamic cast that scans
/// the binary's protocol conformance records: a few milliseconds of start-up (docs/performance.md, "Start-up in detail").
extension ReadinessService: CustomStringConvertible { var description: String { "ReadinessService" } }
extension ListenersService: CustomStringConvertible { var description: String { "ListenersService" } }
extension WatchdogService: CustomStringConvertible { var description: String { "WatchdogService" } }
extension SignalService: CustomStringConvertible { var description: String { "SignalService" } }
