/// The app's state (LIFE-1). The provider starts in `foreground`.
public enum WAFLifecycleState: String, Sendable, CaseIterable, Codable {
    case foreground
    case background
    case closed
}

/// Which states count as active for background refresh (LIFE-1).
public enum WAFLifecycleProfile: String, Sendable, CaseIterable, Codable {
    /// iOS refreshes in the foreground only.
    case ios
    /// Android refreshes whenever the app is not closed.
    case android

    public func isActive(_ state: WAFLifecycleState) -> Bool {
        switch (self, state) {
        case (_, .foreground): true
        case (.android, .background): true
        case (.ios, .background), (_, .closed): false
        }
    }
}
