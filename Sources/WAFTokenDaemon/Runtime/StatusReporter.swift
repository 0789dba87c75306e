import WAFTokenCore

/// Tells the service manager the provider's state in one line (`STATUS=`), after every change.
struct StatusReporter: Sendable {
    let provider: WAFTokenProvider
    let notifier: any ServiceNotifier

    func report() {
        let notifier = notifier
        provider.status { status in notifier.status(StatusLine.compose(status)) }
    }
}
