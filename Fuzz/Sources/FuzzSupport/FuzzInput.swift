/// Reads a fuzzer's bytes as a sequence of decisions and a payload.
public struct FuzzInput {
    private var bytes: ArraySlice<UInt8>

    public init(_ data: UnsafeRawPointer, _ count: Int) {
        bytes = Array(UnsafeRawBufferPointer(start: data, count: count))[...]
    }

    public var isEmpty: Bool { bytes.isEmpty }

    /// The next byte, or 0 when none is left.
    public mutating func byte() -> UInt8 {
        bytes.popFirst() ?? 0
    }

    /// A number in 0..<upper from the next byte.
    public mutating func choose(_ upper: Int) -> Int {
        upper <= 1 ? 0 : Int(byte()) % upper
    }

    /// Up to `count` bytes.
    public mutating func take(_ count: Int) -> [UInt8] {
        let taken = bytes.prefix(count)
        bytes = bytes.dropFirst(taken.count)
        return Array(taken)
    }

    /// Everything left.
    public mutating func rest() -> [UInt8] {
        defer { bytes = [] }
        return Array(bytes)
    }

    /// Cut points in 0...length, from `count` bytes: where to split a payload into chunks.
    public mutating func splits(_ count: Int, length: Int) -> [Int] {
        guard length > 0 else { return [] }
        return (0..<count).map { _ in Int(byte()) * length / 256 }.sorted()
    }
}

/// Stops the fuzzer with a finding: libFuzzer saves the input that did it.
public func violated(_ property: String) -> Never {
    fatalError("property violated: \(property)")
}
