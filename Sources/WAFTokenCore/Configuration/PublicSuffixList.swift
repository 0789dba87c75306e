import CLibPSL

/// The Public Suffix List, as the system ships it, through libpsl.
///
/// `psl_latest` picks the newer of libpsl's built-in list and Debian's `publicsuffix` file, so a
/// system update of the list reaches us without a rebuild. The list decides; nothing is hard-coded.
public enum PublicSuffixList {
    /// Loaded once for the process; a libpsl context is read-only after loading and safe to share.
    private nonisolated(unsafe) static let context: OpaquePointer? = psl_latest(nil) ?? psl_builtin()

    /// Whether the list can be consulted at all (false only if libpsl has no list).
    public static var isAvailable: Bool { context != nil }

    /// Whether `domain` is a public suffix (ICANN or private section, e.g. `co.uk`, `github.io`).
    ///
    /// The implicit `*` rule is not applied, so an unlisted single label such as `localhost` is not
    /// a public suffix. Returns `true` when no list is available, so that callers fail closed.
    public static func isPublicSuffix(_ domain: String) -> Bool {
        guard let context else { return true }
        let type = Int32(PSL_TYPE_ICANN | PSL_TYPE_PRIVATE | PSL_TYPE_NO_STAR_RULE)
        return psl_is_public_suffix2(context, domain.lowercased(), type) != 0
    }
}
