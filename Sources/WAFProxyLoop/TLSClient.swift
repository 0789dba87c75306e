import CLibSSL
import Glibc
import NIOCore
import Synchronization

/// What every TLS client session of a route shares: OpenSSL's context (TLS 1.2 or later, the
/// peer verified against `caFile` or the system's roots) and the last session per server name,
/// which a new connection offers to resume. One serves every loop of a route: OpenSSL's context
/// is safe to share once set up, and the sessions are kept under a lock.
public final class TLSClientContext: @unchecked Sendable {
    let context: OpaquePointer
    private let sessions = Mutex<[String: Session]>([:])

    /// An `SSL_SESSION` this context holds a reference to; OpenSSL counts references atomically.
    private struct Session: @unchecked Sendable {
        let pointer: OpaquePointer
    }

    public init(caFile: String?) throws(LoopError) {
        guard let context = SSL_CTX_new(TLS_client_method()) else { throw .tls("no context: \(Self.lastError())") }
        self.context = context
        _ = waf_ssl_ctx_set_min_tls12(context)
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
        _ = waf_ssl_ctx_set_session_cache_client(context)
        let loaded = caFile.map { SSL_CTX_load_verify_locations(context, $0, nil) } ?? SSL_CTX_set_default_verify_paths(context)
        guard loaded == 1 else { throw .tls("cannot load the trusted certificates \(caFile ?? "of the system"): \(Self.lastError())") }
    }

    deinit {
        sessions.withLock { for session in $0.values { SSL_SESSION_free(session.pointer) } }
        SSL_CTX_free(context)
    }

    /// The last session kept for `name`, taken with a reference of its own (nil: none).
    func session(for name: String) -> OpaquePointer? {
        let found = sessions.withLock { sessions -> Session? in
            guard let session = sessions[name] else { return nil }
            SSL_SESSION_up_ref(session.pointer)
            return session
        }
        return found?.pointer
    }

    /// `session` (whose reference it takes) is now the one to resume for `name`.
    func keep(_ session: OpaquePointer, for name: String) {
        let old = sessions.withLock { $0.updateValue(Session(pointer: session), forKey: name) }
        if let old { SSL_SESSION_free(old.pointer) }
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

/// One TLS client connection as a transformer, over a BIO pair: ciphertext from the network in
/// (`receive`), plaintext out (`read`); plaintext in (`write`), ciphertext out (`takeCiphertext`).
/// It does no I/O, so it runs on any socket of the loop and is tested without one. The handshake
/// runs as ciphertext arrives; plaintext written before it ends waits for it.
public final class TLSClientSession {
    public enum Status: Equatable {
        case open
        /// The server ended the session (close_notify).
        case closed
        case failed(String)
    }

    private let context: TLSClientContext
    private let serverName: String
    private let session: OpaquePointer
    /// Our end of the pair: the socket's bytes go in and come out here.
    private let network: OpaquePointer
    private var waiting: [ByteBuffer] = []
    /// Plaintext written and not yet encrypted (before the handshake ends, or while the pair is full).
    public private(set) var waitingBytes = 0
    private var decrypted = ByteBuffer()
    private var stored = false
    public private(set) var status = Status.open

    /// `serverName`: the name the certificate must carry, sent as SNI unless it is an address.
    public init(_ context: TLSClientContext, serverName: String) throws(LoopError) {
        // An empty name would check no name at all: any certificate of a trusted CA would pass.
        guard !serverName.isEmpty else { throw .tls("no server name to verify the certificate for") }
        guard let session = SSL_new(context.context) else { throw .tls("no session: \(TLSClientContext.lastError())") }
        let named = !serverName.contains(":") && serverName.contains(where: \.isLetter)
        guard SSL_set1_host(session, serverName) == 1, !named || waf_ssl_set_server_name(session, serverName) == 1 else {
            SSL_free(session)
            throw .tls("cannot verify the certificate for \(serverName): \(TLSClientContext.lastError())")
        }
        var inner: OpaquePointer?
        var outer: OpaquePointer?
        guard BIO_new_bio_pair(&inner, 0, &outer, 0) == 1, let inner, let outer else {
            SSL_free(session)
            throw .tls("no BIO pair")
        }
        SSL_set_bio(session, inner, inner)
        self.context = context
        self.serverName = serverName
        self.session = session
        network = outer
        SSL_set_connect_state(session)
        if let resumable = context.session(for: serverName) {
            SSL_set_session(session, resumable)
            SSL_SESSION_free(resumable)
        }
    }

    deinit {
        // Freed without a shutdown, OpenSSL takes the session for a bad one and makes it
        // unresumable; a quiet one (no close_notify: the socket is gone or going) keeps it, as
        // nginx does. Not in the handshake, where it only queues an error.
        if handshakeDone {
            SSL_set_quiet_shutdown(session, 1)
            SSL_shutdown(session)
        }
        ERR_clear_error()
        BIO_free(network)
        SSL_free(session)
    }

    public var handshakeDone: Bool { SSL_is_init_finished(session) == 1 }
    /// Whether the handshake resumed an earlier session.
    var resumed: Bool { SSL_session_reused(session) == 1 }

    /// Starts the handshake: its first flight is then in `takeCiphertext`.
    public func start() {
        ERR_clear_error()
        check(SSL_do_handshake(session))
    }

    /// Ciphertext that arrived from the server: decrypted (or taken by the handshake) at once.
    public func receive(_ ciphertext: ByteBuffer) {
        var bytes = ciphertext
        while status == .open, bytes.readableBytes > 0 {
            let taken = bytes.withUnsafeReadableBytes { BIO_write(network, $0.baseAddress, Int32($0.count)) }
            if taken > 0 { bytes.moveReaderIndex(forwardBy: Int(taken)) }
            // Let OpenSSL read what the pair holds, which makes room for the rest.
            pump()
            if taken <= 0, bytes.readableBytes > 0, BIO_ctrl_get_write_guarantee(network) == 0 {
                return fail("the server's records do not fit the session's buffer")
            }
        }
        flushWaiting()
    }

    /// Moves the plaintext decrypted so far to the end of `plaintext`.
    public func read(into plaintext: inout ByteBuffer) {
        guard decrypted.readableBytes > 0 else { return }
        plaintext.writeBuffer(&decrypted)
        decrypted.clear()
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
    private func pump() {
        while status == .open {
            var result: Int32 = 0
            // OpenSSL's error queue is the thread's, shared by every session on the loop: what
            // another left there must not be read as this one's failure.
            ERR_clear_error()
            decrypted.writeWithUnsafeMutableBytes(minimumWritableBytes: 16 * 1024) { raw in
                result = SSL_read(session, raw.baseAddress, Int32(raw.count))
                return max(0, Int(result))
            }
            if result > 0 {
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
            let result = first.withUnsafeReadableBytes { SSL_write(session, $0.baseAddress, Int32($0.count)) }
            guard result > 0 else { return check(result) }
            // SSL_write writes all of it or nothing (no partial writes without that mode).
            waitingBytes -= first.readableBytes
            waiting.removeFirst()
        }
    }

    /// What a call's `result` means: waiting for the network is normal; anything else ends the session.
    private func check(_ result: Int32) {
        switch SSL_get_error(session, result) {
        case SSL_ERROR_NONE, SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
            return
        case SSL_ERROR_ZERO_RETURN:
            status = .closed
        default:
            let verify = SSL_get_verify_result(session)
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
        guard !stored, handshakeDone, let current = SSL_get1_session(session) else { return }
        guard SSL_SESSION_is_resumable(current) == 1 else { return SSL_SESSION_free(current) }
        stored = true
        context.keep(current, for: serverName)
    }
}
