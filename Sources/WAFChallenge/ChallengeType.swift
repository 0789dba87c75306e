/// The challenge types of the token service (docs/protocol.md §2), by their wire ids.
public enum ChallengeType: String, Sendable, CaseIterable, Hashable {
    case sha256 = "h7b0c470f0cfe3a80a9e26526ad185f484f6817d0832712a4a37a908786a6a67f"
    case pbkdf2 = "ha9b63f35b78882a4dfba8217c4dafe6b9c2706613ea5f942761cfb370c2f2d1d"
    case scrypt = "h72f957df656e80ba55f5d8ce2e8c7ccb59687dba3bfb273d54b08a261b2f3002"
    /// Browser only, answered on `/mp_verify`; never solved here.
    case networkBandwidth = "ha9faaffd31b4d5ede2a2e19d2d7fd525f66fee61911511960dcbb52d3c48ce25"

    /// The id on the wire (`challenge_type`).
    public var id: String { rawValue }

    /// A short name for people and command lines.
    public var name: String {
        switch self {
        case .sha256: "sha256"
        case .pbkdf2: "pbkdf2"
        case .scrypt: "scrypt"
        case .networkBandwidth: "network-bandwidth"
        }
    }

    /// The name inside a challenge's input document.
    public var inputName: String {
        switch self {
        case .sha256: "HashcashSHA2"
        case .pbkdf2: "HashcashPBKDF2"
        case .scrypt: "HashcashScrypt"
        case .networkBandwidth: "NetworkBandwidth"
        }
    }

    public init?(name: String) {
        guard let match = Self.allCases.first(where: { $0.name == name }) else { return nil }
        self = match
    }

    public var isSolvable: Bool { self != .networkBandwidth }

    /// How nonces are written for `client`: the mobile SDKs write SHA-256 and PBKDF2 nonces in
    /// upper-case hex, browsers in decimal; scrypt nonces are always decimal.
    public func nonceFormat(client: String) -> NonceFormat {
        switch self {
        case .sha256, .pbkdf2: client == "browser" ? .decimal : .upperHexadecimal
        case .scrypt, .networkBandwidth: .decimal
        }
    }
}

/// How a nonce number is written into the hashed text.
public enum NonceFormat: String, Sendable, Hashable {
    /// `0`, …, `9`, `A`, …, `FF`, `100`: no padding.
    case upperHexadecimal
    case decimal

    private static let digits = Array("0123456789ABCDEF".utf8)

    /// Writes `nonce` into `buffer` (room for 20 bytes) and returns the byte count.
    @inline(__always)
    public func write(_ nonce: Int, into buffer: UnsafeMutableBufferPointer<UInt8>) -> Int {
        let radix = self == .decimal ? 10 : 16
        var value = nonce
        var count = 0
        repeat {
            buffer[count] = Self.digits[value % radix]
            value /= radix
            count += 1
        } while value > 0
        buffer[0..<count].reverse()
        return count
    }

    public func string(_ nonce: Int) -> String {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { buffer in
            String(decoding: buffer[0..<write(nonce, into: buffer)], as: UTF8.self)
        }
    }
}
