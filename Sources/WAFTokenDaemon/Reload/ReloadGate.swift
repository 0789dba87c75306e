/// What readiness tells the reloader (`Reloader`).
protocol ReloadGate: Sendable {
    /// The start is done: reloads asked during it may run.
    func release()
    /// `READY=1` is out: reloads may tell the service manager of themselves.
    func announce()
}
