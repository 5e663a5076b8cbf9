import Foundation

/// Dates as `JSONEncoder.api` writes them (`.iso8601`: seconds, UTC).
extension JSONWriter {
    /// `YYYY-MM-DDTHH:MM:SSZ`, the fraction dropped (floored), as `.iso8601` does.
    package mutating func date(_ date: Date) {
        let seconds = Int64(date.timeIntervalSince1970.rounded(.down))
        let (days, secondOfDay) = seconds.quotientAndRemainder(dividingBy: 86_400)
        let (day, dayOffset) = secondOfDay < 0 ? (days - 1, secondOfDay + 86_400) : (days, secondOfDay)
        let (year, month, dayOfMonth) = Self.civil(fromDays: day)
        separate()
        guard (0...9999).contains(year) else { return longDate(year, month, dayOfMonth, dayOffset) }
        // Fixed width, so written in one append: `"YYYY-MM-DDTHH:MM:SSZ"`.
        chunk(22) { out in
            out[0] = UInt8(ascii: "\"")
            Self.put(year, width: 4, into: out, at: 1)
            out[5] = UInt8(ascii: "-")
            Self.put(month, width: 2, into: out, at: 6)
            out[8] = UInt8(ascii: "-")
            Self.put(dayOfMonth, width: 2, into: out, at: 9)
            out[11] = UInt8(ascii: "T")
            Self.put(dayOffset / 3600, width: 2, into: out, at: 12)
            out[14] = UInt8(ascii: ":")
            Self.put(dayOffset / 60 % 60, width: 2, into: out, at: 15)
            out[17] = UInt8(ascii: ":")
            Self.put(dayOffset % 60, width: 2, into: out, at: 18)
            out[20] = UInt8(ascii: "Z")
            out[21] = UInt8(ascii: "\"")
            return 22
        }
        needsComma = true
    }

    /// A year past 9999 (more digits), as `.iso8601` writes it.
    mutating func longDate(_ year: Int64, _ month: Int64, _ dayOfMonth: Int64, _ dayOffset: Int64) {
        append(UInt8(ascii: "\""))
        digits(year, width: 4)
        append(UInt8(ascii: "-"))
        digits(month, width: 2)
        append(UInt8(ascii: "-"))
        digits(dayOfMonth, width: 2)
        append(UInt8(ascii: "T"))
        digits(dayOffset / 3600, width: 2)
        append(UInt8(ascii: ":"))
        digits(dayOffset / 60 % 60, width: 2)
        append(UInt8(ascii: ":"))
        digits(dayOffset % 60, width: 2)
        append(UInt8(ascii: "Z"))
        append(UInt8(ascii: "\""))
        needsComma = true
    }

    /// `value` in decimal, zero-padded to `width` (years 0–9999, two-digit fields).
    mutating func digits(_ value: Int64, width: Int) {
        var divisor: Int64 = 1
        for _ in 1..<width { divisor *= 10 }
        while value / divisor >= 10 { divisor *= 10 }
        var rest = value
        while divisor > 0 {
            append(UInt8(ascii: "0") + UInt8(rest / divisor))
            rest %= divisor
            divisor /= 10
        }
    }

    /// `value` (0 up to 10^width - 1) in decimal, zero-padded, at `out[at...]`.
    static func put(_ value: Int64, width: Int, into out: UnsafeMutableBufferPointer<UInt8>, at: Int) {
        var rest = value
        for position in stride(from: at + width - 1, through: at, by: -1) {
            out[position] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: rest % 10)
            rest /= 10
        }
    }

    /// Proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's
    /// `civil_from_days`); the same as Foundation's calendar for every date after 1582.
    static func civil(fromDays days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let shifted = days + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
