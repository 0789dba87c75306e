import NIOCore

/// An upstream's answers read from raw bytes as they arrive, one per request sent: the head
/// (`HTTPHeadParser`, interim 1xx answers skipped), then the body by its framing (`HTTPFraming`),
/// handed on in the bytes it came in, or, for a client that cannot read chunks, as their data.
/// The proxy's upstream connections read with it, whatever loop they run on. A class: what a part
/// sets off may ask for the next answer at once (the connection went back to its pool and was
/// taken again), which must land on this reader while it reads.
package final class AnswerReader {
    package enum Part {
        case head(HTTPHead, HTTPFraming)
        /// Body bytes as the client gets them.
        case body(ByteBuffer)
        case end
    }

    private enum Reading {
        /// Between answers: bytes here mean the connection cannot be reused.
        case idle
        case head(toHead: Bool, decodeChunks: Bool)
        case length(Int)
        case chunked(ChunkedScanner, decode: Bool)
        case untilClose
    }

    package static let maximumHeadBytes = 64 * 1024

    private var reading = Reading.idle
    /// A head not yet complete.
    private var buffered: ByteBuffer?
    /// False once the connection cannot carry another request: its answer ran to the close, said
    /// `Connection: close`, or came with more than its framing.
    package private(set) var reusable = true

    package init() {}

    /// What is held of an answer's head that has not come whole yet.
    package var bufferedBytes: Int { buffered?.readableBytes ?? 0 }

    /// No answer is expected (none asked for, or the last one ended).
    package var isIdle: Bool {
        if case .idle = reading { return true }
        return false
    }

    /// A request went out: read its answer (to a HEAD: no body; for a client that cannot read
    /// chunks: their data).
    package func expectAnswer(toHead: Bool, decodeChunks: Bool) {
        reading = .head(toHead: toHead, decodeChunks: decodeChunks)
        buffered = nil
    }

    /// Bytes from the upstream: each part of the answer goes to `part` in order, which returns
    /// false to stop reading (its owner let the connection go): it hears nothing more of them. Bytes no request asked for make
    /// the connection not reusable; a malformed answer throws.
    package func read(_ bytes: ByteBuffer, _ part: (Part) -> Bool) throws(HTTPHeadParser.Failure) {
        var bytes = bytes
        if var held = buffered {
            held.writeBuffer(&bytes)
            bytes = held
            buffered = nil
        }
        if isIdle, bytes.readableBytes > 0 { reusable = false }
        var going = true
        while going, bytes.readableBytes > 0 {
            switch reading {
            case .idle:
                return
            case .head(let toHead, let decodeChunks):
                guard
                    let end = try bytes.withUnsafeReadableBytes({ raw throws(HTTPHeadParser.Failure) in
                        try HTTPHeadParser.headEnd(raw, limit: Self.maximumHeadBytes)
                    })
                else {
                    buffered = bytes
                    return
                }
                let head = try HTTPHeadParser.response(bytes.readSlice(length: end)!)
                if head.status < 200 {
                    // 100 Continue and other interim answers: the proxy sent the whole request, so
                    // they say nothing the client needs; 101 cannot happen, upgrades are refused.
                    guard head.status != 101 else { throw .malformed("the upstream switched protocols") }
                    continue
                }
                let framing = try HTTPFraming.response(head, toHead: toHead)
                if head.lists("connection", "close") || framing == .untilClose { reusable = false }
                going = part(.head(head, framing))
                switch framing {
                case .none, .length(0): going = going && finish(extra: bytes.readableBytes > 0, part)
                case .length(let length): reading = .length(length)
                case .chunked: reading = .chunked(ChunkedScanner(), decode: decodeChunks)
                case .untilClose: reading = .untilClose
                }
            case .length(let left):
                let slice = bytes.readSlice(length: min(left, bytes.readableBytes))!
                reading = .length(left - slice.readableBytes)
                going = part(.body(slice))
                if left == slice.readableBytes { going = going && finish(extra: bytes.readableBytes > 0, part) }
            case .chunked(var scanner, let decode):
                let start = bytes.readerIndex
                let used = try bytes.withUnsafeReadableBytes { raw throws(HTTPHeadParser.Failure) in
                    try scanner.scan(raw) { range in
                        if decode, going { going = part(.body(bytes.getSlice(at: start + range.lowerBound, length: range.count)!)) }
                    }
                }
                let slice = bytes.readSlice(length: used)!
                if !decode, going { going = part(.body(slice)) }
                reading = .chunked(scanner, decode: decode)
                if scanner.isDone { going = going && finish(extra: bytes.readableBytes > 0, part) }
            case .untilClose:
                going = part(.body(bytes))
                bytes.moveReaderIndex(to: bytes.writerIndex)
            }
        }
    }

    /// The connection closed: true when that close is the end of the answer under way (one
    /// framed by the close), which `part` then hears; false when it cut an answer short.
    package func closed(_ part: (Part) -> Bool) -> Bool {
        reusable = false
        guard case .untilClose = reading else { return false }
        _ = finish(extra: false, part)
        return true
    }

    /// The answer ended; with `extra` bytes after it, which no request asked for.
    private func finish(extra: Bool, _ part: (Part) -> Bool) -> Bool {
        reading = .idle
        if extra { reusable = false }
        return part(.end)
    }
}
