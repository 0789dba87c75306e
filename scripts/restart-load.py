#!/usr/bin/env python3
"""Steady load on waf-tokend's Unix sockets while it restarts: what its consumers see.

    scripts/restart-load.py --target api=/run/waf-tokend/token.sock:/v1/token \\
        --target proxy=/run/waf-tokend/proxy-default.sock:/protected/x [--clients 2]

Per target, CLIENTS clients open a connection per request and CLIENTS keep theirs alive (and
reconnect when the daemon closes it between requests, as HTTP clients do). Runs until SIGTERM,
or SIGINT, then prints one JSON document: requests, answers, failures by
kind, the longest wait a request saw, per target. A failure kind:

    refused    the connect failed (no socket, or nobody listening)
    reset      the connection was reset (ECONNRESET, EPIPE)
    eof        the connection ended before any byte of the answer
    truncated  the connection ended (or was reset) inside an answer
    5xx        an answer with a status of 500 or more
    status     any other status but 200, or a token answer without a token
    timeout    no complete answer within 30 s

No retries: every request counts once. (docs/systemd.md, "Restarts that consumers do not see".)
"""

import argparse
import errno
import json
import select
import signal
import socket
import sys
import threading
import time

TIMEOUT = 30.0


class Failure(Exception):
    def __init__(self, kind):
        super().__init__(kind)
        self.kind = kind


def read_answer(sock, started_answer):
    """Reads one HTTP/1.1 answer; returns (status, body, closes)."""
    data = b""
    deadline = time.monotonic() + TIMEOUT

    def more():
        nonlocal data
        left = deadline - time.monotonic()
        if left <= 0:
            raise Failure("timeout")
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            raise Failure("timeout")
        except (ConnectionResetError, BrokenPipeError):
            raise Failure("truncated" if data else "reset")
        if not chunk:
            raise Failure("truncated" if data else "eof")
        data += chunk
        started_answer[0] = True

    while b"\r\n\r\n" not in data:
        more()
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    closes = headers.get("connection", "").lower() == "close"
    if "content-length" in headers:
        length = int(headers["content-length"])
        data = rest
        while len(data) < length:
            more()
        return status, data[:length], closes
    if headers.get("transfer-encoding", "").lower() == "chunked":
        data = rest
        while not data.endswith(b"0\r\n\r\n"):
            more()
        return status, data, closes
    # Neither: the body runs to the end of the connection.
    data = rest
    while True:
        try:
            more()
        except Failure as failure:
            if failure.kind in ("eof", "truncated"):
                return status, data, True
            raise


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.requests = 0
        self.answers = 0
        self.failures = {}
        self.longest = 0.0
        self.first_failures = []

    def add(self, waited, kind=None, detail=""):
        with self.lock:
            self.requests += 1
            self.longest = max(self.longest, waited)
            if kind is None:
                self.answers += 1
            else:
                self.failures[kind] = self.failures.get(kind, 0) + 1
                if len(self.first_failures) < 5:
                    self.first_failures.append(f"{kind} {detail}".strip())


def connect(path):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(TIMEOUT)
        sock.connect(path)
    except OSError as error:
        sock.close()
        raise Failure("refused" if error.errno in (errno.ECONNREFUSED, errno.ENOENT, errno.EAGAIN) else "reset")
    return sock


def closed_by_peer(sock):
    """A kept-alive connection the daemon closed while it lay idle (what HTTP clients check)."""
    readable, _, _ = select.select([sock], [], [], 0)
    if not readable:
        return False
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def client(path, request_path, token, kept_alive, tally, stop):
    request = f"GET {request_path} HTTP/1.1\r\nHost: localhost\r\nAccept: text/plain\r\n\r\n".encode()
    sock = None
    while not stop.is_set():
        started = time.monotonic()
        started_answer = [False]
        try:
            if sock is not None and closed_by_peer(sock):
                sock.close()
                sock = None
            if sock is None:
                sock = connect(path)
            try:
                sock.sendall(request)
            except (ConnectionResetError, BrokenPipeError):
                raise Failure("reset")
            status, body, closes = read_answer(sock, started_answer)
            waited = time.monotonic() - started
            if status >= 500:
                tally.add(waited, "5xx", str(status))
            elif status != 200 or (token and not body.strip()):
                tally.add(waited, "status", str(status))
            else:
                tally.add(waited)
            if closes or not kept_alive:
                sock.close()
                sock = None
        except Failure as failure:
            tally.add(time.monotonic() - started, failure.kind)
            if sock is not None:
                sock.close()
                sock = None
            if failure.kind == "refused":
                time.sleep(0.01)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--target", action="append", required=True, help="NAME=SOCKET:PATH")
    parser.add_argument("--clients", type=int, default=2, help="per target and kind (default 2)")
    arguments = parser.parse_args()

    stop = threading.Event()
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, lambda *_: stop.set())

    tallies, threads = {}, []
    for target in arguments.target:
        name, _, rest = target.partition("=")
        path, _, request_path = rest.rpartition(":")
        tallies[name] = Tally()
        for kept_alive in (False, True):
            for _ in range(arguments.clients):
                thread = threading.Thread(
                    target=client, args=(path, request_path, name == "api", kept_alive, tallies[name], stop), daemon=True
                )
                thread.start()
                threads.append(thread)
    print("load running", file=sys.stderr, flush=True)
    while not stop.is_set():
        stop.wait(0.2)
    for thread in threads:
        thread.join(TIMEOUT + 5)

    summary = {"targets": {}}
    for name, tally in tallies.items():
        summary["targets"][name] = {
            "requests": tally.requests,
            "answers": tally.answers,
            "failures": tally.failures,
            "longestWaitMs": round(tally.longest * 1000, 1),
            "firstFailures": tally.first_failures,
        }
    summary["requests"] = sum(t.requests for t in tallies.values())
    summary["failed"] = sum(sum(t.failures.values()) for t in tallies.values())
    summary["longestWaitMs"] = round(max(t.longest for t in tallies.values()) * 1000, 1)
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
