import Foundation
import Testing
import WAFTestTraits

@testable import WAFTokenStorage

/// The state file's time, read by hand (`SavedTime`): the same instant Foundation's ISO 8601
/// parser reads, for every time the encoder writes; anything else still read by Foundation.
@Suite("The state file's fetch time", .offPool)
struct SavedTimeTests {
    @Test("STATE1: every time JSONEncoder's .iso8601 writes reads back as the same instant, by hand and by Foundation alike")
    func STATE1_roundTrip() throws {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        var generator = SystemRandomNumberGenerator()
        // Whole seconds from 1970 to 9999, leap days (2000's, not 2100's) and month ends among them.
        let fixed: [TimeInterval] = [0, 951_782_400, 951_868_799, 1_709_164_800, 4_107_542_399, 4_107_542_400, 7_258_118_399, 253_402_300_799]
        let random = (0..<2000).map { _ in TimeInterval(Int64.random(in: 0...253_402_300_799, using: &generator)) }
        for seconds in fixed + random {
            let date = Date(timeIntervalSince1970: seconds)
            let text = try #require(String(data: try encoder.encode([date]), encoding: .utf8)).dropFirst(2).dropLast(2)
            let byHand = try #require(SavedTime.utc(Array(text.utf8)), "\(text)")
            #expect(byHand == date, "\(text)")
            #expect(byHand == (try Date(String(text), strategy: .iso8601)), "\(text)")
        }
    }

    @Test("STATE1: a time in another form is Foundation's to read; one out of range or malformed is none")
    func STATE1_otherForms() {
        #expect(SavedTime.utc(Array("2026-11-29T07:42:17+01:00".utf8)) == nil)
        #expect(SavedTime.parse("2026-11-29T07:42:17+01:00") == SavedTime.parse("2026-11-29T06:42:17Z"))
        for bad in [
            "2026-02-29T00:00:00Z", "2026-13-01T00:00:00Z", "2026-11-29T24:00:00Z", "2026-11-29T06:60:00Z", "2026-11-29 06:42:17Z",
            "2026-1a-29T06:42:17Z", "",
        ] {
            #expect(SavedTime.utc(Array(bad.utf8)) == nil, "\(bad)")
        }
        #expect(SavedTime.utc(Array("2024-02-29T23:59:59Z".utf8)) != nil)
    }
}
