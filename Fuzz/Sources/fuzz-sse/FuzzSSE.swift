import FuzzSupport

@testable import WAFDaemonClient

// The client library's event-stream parser: the same events whatever the chunks.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafeRawPointer, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    let count = input.choose(6)
    let payload = input.rest()
    let cuts = (0..<count).map { index in payload.isEmpty ? 0 : (Int(payload[index % payload.count]) * 31 + index * 17) % (payload.count + 1) }
        .sorted()
    var whole = ServerSentEventParser()
    let expected = whole.feed(payload)
    var chunked = ServerSentEventParser()
    var events: [WAFDaemonEvent] = []
    var start = 0
    for end in cuts + [payload.count] where end >= start {
        events += chunked.feed(payload[start..<end])
        start = end
    }
    if events != expected { violated("chunks gave \(events.count) events, the whole \(expected.count)") }
    return 0
}
