import CLibSSL
import Glibc
import NIOConcurrencyHelpers
import NIOCore

/// What every TLS client session of a route shares: OpenSSL's context (TLS 1.2 or later, the
/// peer verified against `caFile` or the system's roots) and the last session per server name,
/// which a new connection offers to resume. One serves every loop of a route: OpenSSL's context
/// is safe to share once set up, and the sessions are kept under a lock.
public final class TLSClientContext: @unchecked Sendable {
    let context: OpaquePointer
    /// Under NIO's pthread lock, which the thread sanitizer sees.
    private let sessions = NIOLockedValueBox<[String: TLSResumable]>([:])

    public init(caFile: String?) throws(LoopError) {
        guard let context = SSL_CTX_new(TLS_client_method()) else { throw .tls("no context: \(Self.lastError())") }
        self.context = context
        _ = waf_ssl_ctx_set_min_tls12(context)
        _ = waf_ssl_ctx_set_lean_modes(context)
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
        _ = waf_ssl_ctx_set_session_cache_client(context)
        let loaded = caFile.map { SSL_CTX_load_verify_locations(context, $0, nil) } ?? SSL_CTX_set_default_verify_paths(context)
        guard loaded == 1 else { throw .tls("cannot load the trusted certificates \(caFile ?? "of the system"): \(Self.lastError())") }
    }

    deinit {
        SSL_CTX_free(context)
    }

    /// The last session kept for `name`, if any.
    func session(for name: String) -> TLSResumable? {
        sessions.withLockedValue { $0[name] }
    }

    /// `session` is now the one to resume for `name` (the one before goes with its last user).
    func keep(_ session: TLSResumable, for name: String) {
        _ = sessions.withLockedValue { $0.updateValue(session, forKey: name) }
    }

    /// OpenSSL's last error for this thread, as text, and the queue emptied.
    static func lastError() -> String {
        let code = ERR_get_error()
        ERR_clear_error()
        guard code != 0 else { return "no detail" }
        var text = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &text, text.count)
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// An `SSL_SESSION` to resume, holding one of OpenSSL's references to it: given back when the last
/// Swift reference goes (OpenSSL counts its own atomically, so any thread may let it go).
final class TLSResumable: @unchecked Sendable {
    let pointer: OpaquePointer

    /// Takes over a reference the caller holds (`SSL_get1_session`'s).
    init(taking pointer: OpaquePointer) {
        self.pointer = pointer
    }

    deinit {
        SSL_SESSION_free(pointer)
    }
}

/// OpenSSL's objects for one connection, freed together and once: the `SSL` and our end of its
/// BIO pair (the other end is the `SSL`'s). Not copyable: one owner, one `deinit`, whichever way
/// the connection ends, a failed set-up included.
struct TLSHandles: ~Copyable {
    let ssl: OpaquePointer
    /// Ciphertext to and from the socket goes through it (nil until `pair`).
    private(set) var network: OpaquePointer?

    /// Each side of the pair buffers this much. Small: a record larger than it goes through in
    /// parts (OpenSSL gathers a record in its own buffer), and the pair is allocated whole for
    /// each connection, idle ones included (the default is 17 KiB a side).
    static let pairBytes = 4096

    init(_ context: TLSClientContext) throws(LoopError) {
        guard let ssl = SSL_new(context.context) else { throw .tls("no session: \(TLSClientContext.lastError())") }
        self.ssl = ssl
    }

    /// Gives the `SSL` its end of a new BIO pair, keeping ours.
    mutating func pair() throws(LoopError) {
        var inner: OpaquePointer?
        var outer: OpaquePointer?
        guard BIO_new_bio_pair(&inner, Self.pairBytes, &outer, Self.pairBytes) == 1, let inner, let outer else { throw .tls("no BIO pair") }
        SSL_set_bio(ssl, inner, inner)
        network = outer
    }

    deinit {
        // Freed without a shutdown, OpenSSL takes the session for a bad one and makes it
        // unresumable; a quiet one (no close_notify: the socket is gone or going) keeps it, as
        // nginx does. Not in the handshake, where it only queues an error.
        if SSL_is_init_finished(ssl) == 1 {
            SSL_set_quiet_shutdown(ssl, 1)
            SSL_shutdown(ssl)
        }
        ERR_clear_error()
        if let network { BIO_free(network) }
        SSL_free(ssl)
    }
}

/// One TLS client connection as a transformer, over a BIO pair: ciphertext from the network in
/// (`receive`), plaintext out (`read`); plaintext in (`write`), ciphertext out (`takeCiphertext`).
/// It does no I/O, so it runs on any socket of the loop and is tested without one. The handshake
/// runs as ciphertext arrives; plaintext written before it ends waits for it. Between reads it
/// keeps no buffer of its own: what an idle connection holds is OpenSSL's state
/// (`TLSClientSession.heldBytes`).
public final class TLSClientSession {
    public enum Status: Equatable {
        case open
        /// The server ended the session (close_notify).
        case closed
        case failed(String)
    }

    private let context: TLSClientContext
    private let serverName: String
    private let handles: TLSHandles
    private var waiting: [ByteBuffer] = []
    /// Plaintext written and not yet encrypted (before the handshake ends, or while the pair is full).
    public private(set) var waitingBytes = 0
    /// Plaintext decrypted and not yet read: exactly what arrived, never a read buffer's worth.
    private var decrypted: ByteBuffer?
    private var stored = false
    public private(set) var status = Status.open

    /// `serverName`: the name the certificate must carry, sent as SNI unless it is an address.
    public init(_ context: TLSClientContext, serverName: String) throws(LoopError) {
        // An empty name would check no name at all: any certificate of a trusted CA would pass.
        guard !serverName.isEmpty else { throw .tls("no server name to verify the certificate for") }
        var handles = try TLSHandles(context)
        let named = !serverName.contains(":") && serverName.contains(where: \.isLetter)
        guard SSL_set1_host(handles.ssl, serverName) == 1, !named || waf_ssl_set_server_name(handles.ssl, serverName) == 1 else {
            throw .tls("cannot verify the certificate for \(serverName): \(TLSClientContext.lastError())")
        }
        try handles.pair()
        SSL_set_connect_state(handles.ssl)
        // SSL_set_session takes a reference of its own.
        if let resumable = context.session(for: serverName) { SSL_set_session(handles.ssl, resumable.pointer) }
        self.context = context
        self.serverName = serverName
        self.handles = handles
    }

    private var ssl: OpaquePointer { handles.ssl }
    private var network: OpaquePointer { handles.network! }

    /// What the session holds beyond `LoopStream.reservation`: a record's buffer while part of a
    /// record waits for the rest (OpenSSL frees it once the record is whole, with the lean modes).
    public var heldBeyond: Int { SSL_has_pending(ssl) == 1 ? Self.recordBuffer : 0 }
    /// OpenSSL's read buffer: the largest record with its header and padding, measured
    /// (`StreamMemoryTests`: 16.6 KiB).
    static let recordBuffer = 17 * 1024

    public var handshakeDone: Bool { SSL_is_init_finished(ssl) == 1 }
    /// Whether the handshake resumed an earlier session.
    var resumed: Bool { SSL_session_reused(ssl) == 1 }

    /// Starts the handshake: its first flight is then in `takeCiphertext`.
    public func start() {
        ERR_clear_error()
        check(SSL_do_handshake(ssl))
    }

    /// Ciphertext that arrived from the server: decrypted (or taken by the handshake) at once,
    /// through `scratch` (the loop's read buffer), kept in a buffer of the size that came out.
    public func receive(_ ciphertext: ByteBuffer, scratch: inout [UInt8]) {
        var bytes = ciphertext
        while status == .open, bytes.readableBytes > 0 {
            let taken = bytes.withUnsafeReadableBytes { BIO_write(network, $0.baseAddress, Int32($0.count)) }
            if taken > 0 { bytes.moveReaderIndex(forwardBy: Int(taken)) }
            // Let OpenSSL read what the pair holds, which makes room for the rest.
            pump(&scratch)
            if taken <= 0, bytes.readableBytes > 0, BIO_ctrl_get_write_guarantee(network) == 0 {
                return fail("the server's records do not fit the session's buffer")
            }
        }
        flushWaiting()
    }

    /// `receive` with a scratch buffer of its own (tests).
    public func receive(_ ciphertext: ByteBuffer) {
        var scratch = [UInt8](repeating: 0, count: 16 * 1024)
        receive(ciphertext, scratch: &scratch)
    }

    /// The plaintext decrypted so far, if any; the session keeps none of it.
    public func read() -> ByteBuffer? {
        defer { decrypted = nil }
        return decrypted
    }

    /// Moves the plaintext decrypted so far to the end of `plaintext`.
    public func read(into plaintext: inout ByteBuffer) {
        guard var bytes = read() else { return }
        plaintext.writeBuffer(&bytes)
    }

    /// Plaintext for the server: encrypted now, or once the handshake is done.
    public func write(_ plaintext: ByteBuffer) {
        guard status == .open, plaintext.readableBytes > 0 else { return }
        waiting.append(plaintext)
        waitingBytes += plaintext.readableBytes
        flushWaiting()
    }

    /// The ciphertext for the server, if any (records of the handshake and of what was written).
    public func takeCiphertext() -> ByteBuffer? {
        var out: ByteBuffer?
        while true {
            let pending = Int(BIO_ctrl_pending(network))
            guard pending > 0 else { break }
            var bytes = out ?? ByteBufferAllocator().buffer(capacity: pending)
            bytes.writeWithUnsafeMutableBytes(minimumWritableBytes: pending) { raw in
                max(0, Int(BIO_read(network, raw.baseAddress, Int32(pending))))
            }
            out = bytes
            // Room in the pair again: plaintext that did not fit goes now.
            flushWaiting()
        }
        return out
    }

    /// SSL_read until OpenSSL needs more from the network.
    private func pump(_ scratch: inout [UInt8]) {
        while status == .open {
            // OpenSSL's error queue is the thread's, shared by every session on the loop: what
            // another left there must not be read as this one's failure.
            ERR_clear_error()
            let result = scratch.withUnsafeMutableBytes { SSL_read(ssl, $0.baseAddress, Int32($0.count)) }
            if result > 0 {
                scratch.withUnsafeBytes { raw in
                    let piece = UnsafeRawBufferPointer(rebasing: raw[0..<Int(result)])
                    if decrypted == nil { decrypted = ByteBuffer(bytes: piece) } else { decrypted!.writeBytes(piece) }
                }
                storeSession()
                continue
            }
            check(result)
            return
        }
    }

    private func flushWaiting() {
        guard status == .open, handshakeDone else { return }
        storeSession()
        while let first = waiting.first {
            ERR_clear_error()
            let result = first.withUnsafeReadableBytes { SSL_write(ssl, $0.baseAddress, Int32($0.count)) }
            guard result > 0 else { return check(result) }
            // SSL_write writes all of it or nothing (no partial writes without that mode).
            waitingBytes -= first.readableBytes
            waiting.removeFirst()
        }
    }

    /// What a call's `result` means: waiting for the network is normal; anything else ends the session.
    private func check(_ result: Int32) {
        switch SSL_get_error(ssl, result) {
        case SSL_ERROR_NONE, SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
            return
        case SSL_ERROR_ZERO_RETURN:
            status = .closed
        default:
            let verify = SSL_get_verify_result(ssl)
            let why = verify == X509_V_OK ? TLSClientContext.lastError() : String(cString: X509_verify_cert_error_string(verify))
            fail(why)
        }
    }

    private func fail(_ why: String) {
        ERR_clear_error()
        status = .failed(why)
        waiting.removeAll()
        waitingBytes = 0
    }

    /// The session, once resumable (after the handshake; TLS 1.3's tickets come after it), for
    /// the next connection to the same name.
    private func storeSession() {
        guard !stored, handshakeDone, let current = SSL_get1_session(ssl) else { return }
        let resumable = TLSResumable(taking: current)
        guard SSL_SESSION_is_resumable(current) == 1 else { return }
        stored = true
        context.keep(resumable, for: serverName)
    }
}
