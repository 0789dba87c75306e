#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The state file's `fetchedAt`, read without Foundation's ISO 8601 parser: that parser's first
/// use sets up calendars and time zones (reading `/etc/localtime`), about 3 % of a start's CPU
/// (docs/performance.md, "Start-up"). What `JSONEncoder`'s `.iso8601` writes, `2026-11-29T06:42:17Z`,
/// is read here; anything else (an offset, fractions) goes to Foundation's parser as before.
enum SavedTime {
    static func parse(_ text: String) -> Date? {
        if let date = utc(Array(text.utf8)) { return date }
        return try? Date(text, strategy: .iso8601)
    }

    /// `YYYY-MM-DDTHH:MM:SSZ`, each field in its range; nil otherwise.
    static func utc(_ bytes: [UInt8]) -> Date? {
        guard bytes.count == 20, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"), bytes[10] == UInt8(ascii: "T"),
            bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"), bytes[19] == UInt8(ascii: "Z")
        else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for byte in bytes[range] {
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10), let hour = number(11..<13),
            let minute = number(14..<16), let second = number(17..<19), year >= 1970, (1...12).contains(month),
            (1...days(in: month, of: year)).contains(day), hour < 24, minute < 60, second < 60
        else { return nil }
        return Date(
            timeIntervalSince1970: TimeInterval(daysSince1970(year: year, month: month, day: day) * 86_400 + hour * 3_600 + minute * 60 + second))
    }

    /// Days from 1970-01-01 to a date of the proleptic Gregorian calendar (Howard Hinnant's
    /// `days_from_civil`): plain arithmetic, where `timegm` reads the time zone on its first call.
    static func daysSince1970(year: Int, month: Int, day: Int) -> Int {
        let shifted = month <= 2 ? year - 1 : year
        let era = (shifted >= 0 ? shifted : shifted - 399) / 400
        let yearOfEra = shifted - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    private static func days(in month: Int, of year: Int) -> Int {
        switch month {
        case 2: year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }
}
