import WAFDaemonTransport
import WAFHTTPWire

extension DaemonError {
    /// What the proxy's own head parser could not read, in the catalog's words (the socket API's
    /// codec has its mapping beside the catalog).
    init(_ failure: HTTPHeadParser.Failure) {
        self =
            switch failure {
            case .tooLarge: .headTooLarge
            case .unsupportedVersion: .unsupportedVersion
            case .malformed(let why): .malformed(why)
            }
    }

    /// Bytes that cannot be trusted to end where they seem to, whatever the reader threw.
    init(unreadable failure: any Error) {
        self = failure as? DaemonError ?? (failure as? HTTPHeadParser.Failure).map(DaemonError.init) ?? .malformed("\(failure)")
    }
}
