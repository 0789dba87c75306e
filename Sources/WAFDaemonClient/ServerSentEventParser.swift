/// Reads a `text/event-stream` as it arrives, chunk by chunk (the WHATWG event-stream format:
/// `event:` and `data:` lines, a blank line ends an event, `:` lines are comments).
struct ServerSentEventParser {
    private var buffer: [UInt8] = []
    private var name = ""
    private var data: [String] = []

    mutating func feed(_ bytes: some Sequence<UInt8>) -> [WAFDaemonEvent] {
        buffer.append(contentsOf: bytes)
        var events: [WAFDaemonEvent] = []
        while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
            var line = buffer[..<newline]
            if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
            let text = String(decoding: line, as: UTF8.self)
            buffer.removeSubrange(...newline)
            if text.isEmpty {
                if !data.isEmpty { events.append(WAFDaemonEvent(name: name.isEmpty ? "message" : name, data: data.joined(separator: "\n"))) }
                name = ""
                data = []
            } else if text.hasPrefix(":") {
                continue
            } else {
                let parts = text.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
                let field = String(parts[0])
                var value = parts.count > 1 ? String(parts[1]) : ""
                if value.hasPrefix(" ") { value.removeFirst() }
                switch field {
                case "event": name = value
                case "data": data.append(value)
                default: break
                }
            }
        }
        return events
    }
}
