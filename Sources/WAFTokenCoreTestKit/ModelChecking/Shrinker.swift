/// Makes a failing sequence short enough to read: removes chunks of steps, then single steps, as
/// long as the sequence still fails (a simple form of delta debugging).
public enum Shrinker {
    public static func shrink<Step>(_ steps: [Step], stillFails: ([Step]) -> Bool) -> [Step] {
        var current = steps
        var chunk = max(1, current.count / 2)
        while chunk >= 1 {
            var index = 0
            var removedAny = false
            while index < current.count {
                var candidate = current
                candidate.removeSubrange(index..<min(current.count, index + chunk))
                if stillFails(candidate) {
                    current = candidate
                    removedAny = true
                } else {
                    index += chunk
                }
            }
            if !removedAny { chunk /= 2 }
        }
        return current
    }
}
