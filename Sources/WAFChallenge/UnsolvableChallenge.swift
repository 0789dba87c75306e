/// What the solver cannot solve, by kind, for `waf_tokend_challenge_unsolvable_total{reason}`
/// (docs/canary.md): read back from the words `Challenge` and `ProofOfWork` use for it, which this
/// file keeps beside them.
public enum UnsolvableChallenge {
    /// `unknownType` (a challenge type this client does not know, or one for browsers only),
    /// `unknownDifficulty` (a difficulty or memory outside what it solves), `captcha`; nil for any
    /// other reason a challenge was refused (a malformed document).
    public static func reason(_ description: String) -> String? {
        let text = description.lowercased()
        if text.contains("captcha") { return "captcha" }
        if text.contains("is not a type this client knows") || text.contains("is for browsers only") { return "unknownType" }
        if text.hasPrefix("difficulty") || text.contains("memory") { return "unknownDifficulty" }
        return nil
    }
}
