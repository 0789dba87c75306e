import AsyncHTTPClient
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import WAFChallenge
import WAFTokenCore

#if canImport(Glibc)
import Glibc
#endif

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The provider's client to an AWS WAF token service (or the local one), on AsyncHTTPClient:
/// `GET …/inputs`, solve, `POST …/verify` (docs/protocol.md). One call is one attempt;
/// the provider's retry rules decide what follows a failure.
public final class HTTPTokenFetcher: WAFTokenFetcher {
    private struct CachedRedirect {
        let target: String
        let expires: ContinuousClock.Instant
    }

    public let settings: Settings
    private let http: LazyHTTPClient
    private let logger: Logger
    /// `/inputs` redirects answered with `Cache-Control: max-age`, remembered as the iOS SDK does.
    private let redirects = NIOLockedValueBox<[String: CachedRedirect]>([:])

    /// Fails when the CA file cannot be read: that is a configuration error, found at start.
    public init(settings: Settings = Settings(), logger: Logger = Logger(label: "waf-token-service-client")) throws {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let caFile = settings.caFile {
            tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(caFile))
        }
        // The CA file is read now (a configuration error at start); the client is made on the
        // first request.
        http = LazyHTTPClient { [tls] in
            let timeout = TimeAmount.nanoseconds(settings.timeout.nanoseconds)
            var configuration = HTTPClient.Configuration(
                tlsConfiguration: tls,
                redirectConfiguration: .follow(max: 5, allowCycles: false),
                timeout: .init(connect: timeout, read: timeout), proxy: settings.proxy)
            // The provider's retry rules (RET-1…) own retrying: a connection that cannot be made fails
            // the attempt at once instead of being retried inside the client until the timeout.
            configuration.connectionPool.retryConnectionEstablishment = false
            return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
        }
        self.settings = settings
        self.logger = logger
    }

    public func shutdown() async throws {
        try await http.shutdown()
    }

    public func fetchToken(_ request: WAFTokenFetchRequest) async throws(SdkError) -> String {
        let clock = ContinuousClock()
        let started = clock.now
        let inputsURL = request.configuration.tokenServiceBaseURL + "/inputs?client=" + settings.client
        let (first, finalURL) = try await getChallenge(inputsURL)
        let challengeTime = clock.now - started
        let verifyURL = Self.verifyURL(afterInputsAt: finalURL)

        var challenge = first
        // A 2xx verify answer with a fresh challenge means ours expired: solve that one and verify
        // again, once, within the same attempt.
        for round in 1...2 {
            let solving = clock.now
            let solution = try await solve(challenge)
            let metrics = [
                VerifyRequest.Metric(name: "GetChallengeTime", value: challengeTime.milliseconds, unit: "Milliseconds"),
                VerifyRequest.Metric(name: "ChallengeExecutionTime", value: (clock.now - solving).milliseconds, unit: "Milliseconds"),
            ]
            let verify = VerifyRequest(
                challenge: challenge, solution: solution, client: settings.client, checksum: settings.checksum,
                domain: request.configuration.domainName, existingToken: request.existingToken, metrics: metrics)
            switch try await post(verify, to: verifyURL) {
            case .token(let token):
                return token
            case .freshChallenge(let fresh) where round == 1:
                logger.debug("challenge expired; solving the fresh one")
                challenge = fresh
            case .freshChallenge:
                break
            }
        }
        throw .invalidVerifyChallengeResponse("the challenge expired twice in one attempt")
    }

    // MARK: Steps

    private func getChallenge(_ inputsURL: String) async throws(SdkError) -> (Challenge, String) {
        let target = cachedRedirect(for: inputsURL) ?? inputsURL
        var request = HTTPClientRequest(url: target)
        request.headers.add(name: "Accept", value: "application/json")
        request.headers.add(name: "User-Agent", value: "waf-tokend")
        let (response, answer): (HTTPClientResponse, ByteBuffer?)
        do throws(SdkError) {
            (response, answer) = try await exchange(
                request, url: target, failure: SdkError.errorInvokingGetChallengeEndpoint, tooLarge: SdkError.invalidChallenge)
        } catch {
            forgetRedirect(for: inputsURL)
            throw error
        }
        let finalURL = response.url?.absoluteString ?? target
        guard let body = answer else {
            forgetRedirect(for: inputsURL)
            throw .errorInvokingGetChallengeEndpoint("HTTP \(response.status.code) from \(Self.withoutQuery(finalURL))")
        }
        if let reason = Self.insecureRedirect(finalURL) {
            throw .errorInvokingGetChallengeEndpoint(reason)
        }
        rememberRedirect(from: inputsURL, response: response)
        do throws(ChallengeError) {
            return (try Challenge(parsing: body.readableBytesView), finalURL)
        } catch {
            throw .invalidChallenge(error.description)
        }
    }

    private func solve(_ challenge: Challenge) async throws(SdkError) -> String {
        let work = challenge.proofOfWork(checksum: settings.checksum, nonceFormat: challenge.type.nonceFormat(client: settings.client))
        do throws(ProofOfWorkError) {
            let solution = try await settings.solver.solve(work)
            logger.debug(
                "challenge solved",
                metadata: [
                    "type": "\(challenge.type.name)", "difficulty": "\(challenge.difficulty)",
                    "nonces": "\(solution.noncesTried)", "ms": "\(solution.elapsed.milliseconds)",
                ])
            return solution.nonce
        } catch .cancelled {
            throw .unexpected(CancellationError())
        } catch {
            throw .errorRunningChallenge(error.description)
        }
    }

    private func post(_ verify: VerifyRequest, to url: String) async throws(SdkError) -> VerifyOutcome {
        let body: [UInt8]
        do {
            body = try verify.encoded()
        } catch {
            throw .invalidVerifyChallengeRequest("\(error)")
        }
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "Accept", value: "application/json")
        request.headers.add(name: "User-Agent", value: "waf-tokend")
        request.body = .bytes(ByteBuffer(bytes: body))
        let (response, answer) = try await exchange(
            request, url: url, failure: SdkError.errorInvokingVerifyEndpoint, tooLarge: SdkError.invalidVerifyChallengeResponse)
        guard let answer else {
            throw .errorInvokingVerifyEndpoint("HTTP \(response.status.code) from \(url)")
        }
        do throws(ChallengeError) {
            return try VerifyOutcome(parsing: answer.readableBytesView)
        } catch {
            throw .invalidVerifyChallengeResponse(error.description)
        }
    }

    /// One request and, for a 2xx answer, its body, within the timeout as a whole (`RequestDeadline`).
    private func exchange(
        _ request: HTTPClientRequest, url: String, failure: @escaping @Sendable (String) -> SdkError,
        tooLarge: @escaping @Sendable (String) -> SdkError
    ) async throws(SdkError) -> (HTTPClientResponse, ByteBuffer?) {
        let timeout = settings.timeout
        let host = URL(string: url)?.host() ?? url
        return try await RequestDeadline.run(
            within: timeout, timedOut: failure("no complete answer from \(host) within \(timeout.seconds) s")
        ) { [http, settings] () async throws(SdkError) -> (HTTPClientResponse, ByteBuffer?) in
            let response: HTTPClientResponse
            do {
                response = try await http.client().execute(request, timeout: .nanoseconds(timeout.nanoseconds))
            } catch {
                if let refused = error as? HTTPClientError, let proxy = settings.proxy,
                    let sentence = await ProxyRefusal.describe(refused, proxy: proxy, url: url, timeout: timeout)
                {
                    throw .networkUnavailable(sentence)
                }
                throw Self.transportError(error, url: url, otherwise: failure)
            }
            guard (200..<300).contains(response.status.code) else { return (response, nil) }
            do {
                return (response, try await response.body.collect(upTo: settings.maximumBodyBytes))
            } catch is NIOTooManyBytesError {
                throw tooLarge("the answer is larger than \(settings.maximumBodyBytes) bytes")
            } catch {
                throw Self.transportError(error, url: url, otherwise: { failure("reading the answer failed: \($0)") })
            }
        }
    }

    // MARK: Helpers

    /// The verify URL: the final `/inputs` URL without its query, `/inputs` replaced by `/verify`.
    static func verifyURL(afterInputsAt finalURL: String) -> String {
        let path = withoutQuery(finalURL)
        return path.hasSuffix("/inputs") ? String(path.dropLast("inputs".count)) + "verify" : path + "/verify"
    }

    private static func withoutQuery(_ url: String) -> String {
        String(url.prefix { $0 != "?" && $0 != "#" })
    }

    /// A redirect must not leave https for plain http, except on loopback.
    private static func insecureRedirect(_ finalURL: String) -> String? {
        guard let url = URL(string: finalURL), url.scheme?.lowercased() == "http" else { return nil }
        let host = url.host(percentEncoded: false) ?? ""
        let loopback = host == "localhost" || host == "::1" || host == "[::1]" || host.hasPrefix("127.")
        return loopback ? nil : "redirected to plain http at \(withoutQuery(finalURL))"
    }

    private static func transportError(_ error: any Error, url: String, otherwise: (String) -> SdkError) -> SdkError {
        if error is CancellationError || (error as? HTTPClientError) == .cancelled {
            return .unexpected(CancellationError())
        }
        let host = URL(string: url)?.host() ?? url
        if isUnreachable(error) { return .networkUnavailable("\(host): \(error)") }
        if let clientError = error as? HTTPClientError, clientError == .deadlineExceeded || clientError == .readTimeout {
            return otherwise("no answer from \(host) within the timeout")
        }
        return otherwise("\(host): \(error)")
    }

    /// The host cannot be reached at all: refused, unroutable, unknown, or no connection in time.
    private static func isUnreachable(_ error: any Error) -> Bool {
        switch error {
        case is NIOConnectionError:
            return true
        case let error as IOError:
            return [ECONNREFUSED, ENETUNREACH, EHOSTUNREACH].contains(error.errnoCode)
        case ChannelError.connectTimeout:
            return true
        case let error as HTTPClientError:
            return error == .connectTimeout
        default:
            return false
        }
    }

    private func cachedRedirect(for url: String) -> String? {
        redirects.withLockedValue { cache in
            guard let entry = cache[url] else { return nil }
            if entry.expires > ContinuousClock.now { return entry.target }
            cache[url] = nil
            return nil
        }
    }

    private func forgetRedirect(for url: String) {
        redirects.withLockedValue { $0[url] = nil }
    }

    private func rememberRedirect(from url: String, response: HTTPClientResponse) {
        // Every hop but the last is a redirect; the first one that allows caching decides.
        for hop in response.history.dropLast() {
            guard (300..<400).contains(hop.responseHead.status.code),
                let maxAge = Self.maxAge(hop.responseHead.headers["Cache-Control"]), maxAge > 0,
                let finalURL = response.url?.absoluteString
            else { continue }
            let entry = CachedRedirect(target: finalURL, expires: .now + .seconds(maxAge))
            redirects.withLockedValue { $0[url] = entry }
            logger.debug("remembering the /inputs redirect", metadata: ["seconds": "\(maxAge)"])
            return
        }
    }

    static func maxAge(_ values: [String]) -> Int? {
        for directive in values.flatMap({ $0.split(separator: ",") }) {
            let parts = directive.split(separator: "=", maxSplits: 1).map { $0.filter { !$0.isWhitespace } }
            if parts.count == 2, parts[0].lowercased() == "max-age", let seconds = Int(parts[1]) { return seconds }
        }
        return nil
    }
}

extension Duration {
    var milliseconds: Double { seconds * 1000 }
}
