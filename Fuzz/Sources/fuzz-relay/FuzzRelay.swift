import FuzzSupport
import NIOCore
import WAFProxyLoop
import WAFProxyLoopTestKit

@testable import WAFDaemonConfiguration
@testable import WAFHTTPWire
@testable import WAFTokenProxy

// The proxy's reading of HTTP (Proxy/Relay): request heads, answer heads, chunked bodies, in the
// two reads the input cuts them into. Properties: nothing traps; a head is found (or refused) the
// same whatever the cut; what the proxy accepts, it sends on in a form its own strict reading
// accepts again, with the same framing (it never forwards anything a server could read two ways);
// a chunked body reads the same whatever the cut; an upstream's answers (AnswerReader) are
// handed on the same whatever the cut, their bytes in order and nothing after a stop. With a TLS
// upstream (a first byte of 0xF0 or more), the loop's TLS client against a libssl server in
// memory: what the server sends reaches the client whole and in order, whatever the cuts of its
// records; bytes that are not the server's records fail the session and yield no plaintext.

private let upstream = try! UpstreamTarget.parse("https://api.example.com/base/", domainName: "example.com").get()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafeRawPointer, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    let first = input.byte()
    let mode = Int(first) % 4
    let cut = Int(input.byte()) | Int(input.byte()) << 8
    let bytes = input.rest()
    if first >= 0xF0 {
        TLSUpstream.fuzz(bytes, cut: cut, forged: first & 1 == 1)
        return 0
    }
    switch mode {
    case 0: request(bytes, cut: cut % (bytes.count + 1))
    case 1: answer(bytes)
    case 2: chunks(bytes, cut: cut % (bytes.count + 1))
    default: answers(bytes, cut: cut % (bytes.count + 1), decode: cut & 1 == 1)
    }
    return 0
}

private func headEnd(_ bytes: [UInt8], cut: Int) -> Result<Int?, HTTPHeadParser.Failure> {
    do {
        if let first = try bytes[..<cut].withUnsafeBytes({ try HTTPHeadParser.headEnd($0, limit: 16384) }) { return .success(first) }
        return .success(try bytes.withUnsafeBytes { try HTTPHeadParser.headEnd($0, limit: 16384, from: cut) })
    } catch {
        return .failure(error as! HTTPHeadParser.Failure)
    }
}

private func request(_ bytes: [UInt8], cut: Int) {
    let whole = headEnd(bytes, cut: bytes.count)
    let twoReads = headEnd(bytes, cut: cut)
    // A head over the limit may be refused at the first read or found whole: both are fine.
    if whole != twoReads, whole != .failure(.tooLarge), twoReads != .failure(.tooLarge) {
        violated("the head's end depends on where the reads cut it: \(whole) against \(twoReads)")
    }
    guard case .success(let end?) = whole, let head = try? HTTPHeadParser.request(ByteBuffer(bytes: bytes[..<end])),
        let framing = try? HTTPFraming.request(head)
    else { return }
    let forwarded: ProxyRules.Framing =
        switch framing {
        case .none, .untilClose: .none
        case .length(let length): .length(length)
        case .chunked: .chunked
        }
    var sent = ByteBuffer()
    guard let target = try? ProxyRules.upstreamTarget(for: head, upstream: upstream).get() else { return }
    ProxyRules.writeUpstreamHead(
        head, target: target, upstream: upstream, token: "T", placement: .cookie, cookieApplies: { _ in true }, framing: forwarded, into: &sent)
    guard let again = try? HTTPHeadParser.request(sent), let framingAgain = try? HTTPFraming.request(again) else {
        violated("the proxy forwards a head it would refuse itself: \(String(decoding: sent.readableBytesView, as: UTF8.self).debugDescription)")
    }
    if framingAgain != (framing == .untilClose ? .none : framing) {
        violated("the forwarded head frames its body otherwise: \(framing) → \(framingAgain)")
    }
    if again.count("host") != 1 || again.count("cookie") != 1 { violated("the forwarded head has not exactly one Host and one Cookie") }
}

private func answer(_ bytes: [UInt8]) {
    guard case .success(let end?) = headEnd(bytes, cut: bytes.count), let head = try? HTTPHeadParser.response(ByteBuffer(bytes: bytes[..<end])),
        let framing = try? HTTPFraming.response(head, toHead: false)
    else { return }
    for clientMinorVersion in [0, 1] {
        let clientFraming = ProxyRules.clientFraming(framing, clientMinorVersion: clientMinorVersion)
        var sent = ByteBuffer()
        ProxyRules.writeClientHead(head, framing: framing, clientFraming: clientFraming, keepAlive: true, into: &sent)
        guard let again = try? HTTPHeadParser.response(sent), let framingAgain = try? HTTPFraming.response(again, toHead: false) else {
            violated("the client gets a head the proxy would refuse: \(String(decoding: sent.readableBytesView, as: UTF8.self).debugDescription)")
        }
        if clientFraming == .asUpstream, framingAgain != framing {
            violated("the client reads the body's framing otherwise: \(framing) → \(framingAgain)")
        }
    }
}

private func chunks(_ bytes: [UInt8], cut: Int) {
    func read(_ pieces: [ArraySlice<UInt8>]) -> (data: [UInt8], used: Int, done: Bool)? {
        var scanner = ChunkedScanner()
        var data: [UInt8] = []
        var used = 0
        for piece in pieces where !scanner.isDone {
            let copy = Array(piece)
            guard let taken = try? copy.withUnsafeBytes({ raw throws(HTTPHeadParser.Failure) in try scanner.scan(raw) { data += copy[$0] } }) else {
                return nil
            }
            used += taken
        }
        return (data, used, scanner.isDone)
    }
    let whole = read([bytes[...]])
    let twoReads = read([bytes[..<cut], bytes[cut...]])
    if whole?.data != twoReads?.data || whole?.used != twoReads?.used || whole?.done != twoReads?.done {
        violated("a chunked body reads differently when cut at \(cut)")
    }
    if let whole, whole.used > bytes.count || (!whole.done && whole.used != bytes.count) { violated("the scanner's count is off") }
}

private func answers(_ bytes: [UInt8], cut: Int, decode: Bool) {
    /// What the reader hands on for the bytes in `pieces`: parts as text, whether reusable, and
    /// whether it threw (then what came before).
    func read(_ pieces: [ArraySlice<UInt8>]) -> (parts: [String], reusable: Bool, failed: Bool) {
        let reader = AnswerReader()
        reader.expectAnswer(toHead: false, decodeChunks: decode)
        var parts: [String] = []
        var body: [UInt8] = []
        var ended = false
        do {
            for piece in pieces {
                try reader.read(ByteBuffer(bytes: piece)) { part in
                    if ended { violated("a part after the answer's end") }
                    switch part {
                    case .head(let head, let framing): parts.append("head \(head.status) \(framing)")
                    case .body(let bytes): body += Array(bytes.readableBytesView)
                    case .end:
                        parts.append("body \(body)")
                        parts.append("end")
                        body = []
                        ended = true
                    }
                    return !ended
                }
            }
        } catch {
            return (parts, reader.reusable, true)
        }
        if !body.isEmpty { parts.append("body \(body)") }
        return (parts, reader.reusable, false)
    }
    let whole = read([bytes[...]])
    let twoReads = read([bytes[..<cut], bytes[cut...]])
    // A failure may come at the first read or at the second: what the two hand on then differs
    // by where the cut fell, and only a trap would be a finding.
    guard !whole.failed, !twoReads.failed else { return }
    if whole.parts.joined(separator: "|") != twoReads.parts.joined(separator: "|") {
        violated("an answer is handed on differently when cut at \(cut): \(whole.parts) against \(twoReads.parts)")
    }
}
