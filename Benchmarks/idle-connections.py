#!/usr/bin/env python3
"""What idle connections cost: the daemon's private memory before and after N connections that
each made one request and then stay open, idle (TENANT-6: 1,000 add at most 16 MiB).

    Benchmarks/idle-connections.py [N] [BIN_DIR]

BIN_DIR defaults to the static release build (scripts/swift-release.sh), else the debug build.
The daemon runs in demo mode (its local token service in the same process) on a socket of its
own; the figure is the growth of Private_Clean + Private_Dirty (/proc/PID/smaps_rollup).
"""
import os, signal, socket, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
count = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
candidates = [sys.argv[2]] if len(sys.argv) > 2 else [os.path.join(ROOT, ".build-static/release"), os.path.join(ROOT, ".build/debug")]
binary = next((os.path.join(d, "waf-tokend") for d in candidates if os.path.exists(os.path.join(d, "waf-tokend"))), None)
if binary is None:
    sys.exit("idle-connections: no waf-tokend built (scripts/swift-release.sh, or swift build)")


def private_kib(pid):
    fields = {}
    for line in open(f"/proc/{pid}/smaps_rollup"):
        parts = line.split()
        if len(parts) >= 2 and parts[0].endswith(":"):
            fields[parts[0][:-1]] = int(parts[1])
    return fields["Private_Clean"] + fields["Private_Dirty"]


def request(sock):
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    data = b""
    while b"\r\n\r\n" not in data or not data.endswith(b"}\n"):
        chunk = sock.recv(4096)
        if not chunk:
            raise RuntimeError("closed")
        data += chunk


directory = tempfile.mkdtemp(prefix="waf-idle-")
path = os.path.join(directory, "token.sock")
limit = max(count + 64, 4096)
daemon = subprocess.Popen(
    [binary, "--demo", "--config", "/dev/null", "--socket-path", path, "--socket-idle-timeout-sec", "3600",
     "--socket-max-connections", str(limit), "--socket-max-connections-per-user", str(limit), "--log-level", "warning"],
    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    for _ in range(500):
        if os.path.exists(path):
            try:
                probe = socket.socket(socket.AF_UNIX); probe.connect(path); request(probe); probe.close(); break
            except OSError:
                pass
        time.sleep(0.02)
    # Warm: the loops' buffers and the first connection's allocations are paid before measuring.
    warm = []
    for _ in range(50):
        s = socket.socket(socket.AF_UNIX); s.connect(path); request(s); warm.append(s)
    for s in warm: s.close()
    time.sleep(1)
    before = private_kib(daemon.pid)
    idle = []
    for _ in range(count):
        s = socket.socket(socket.AF_UNIX); s.connect(path); request(s); idle.append(s)
    time.sleep(1)
    after = private_kib(daemon.pid)
    grown = after - before
    print(f"{os.path.relpath(binary, ROOT)}: {count} idle connections add {grown / 1024:.1f} MiB of private memory "
          f"({grown / count:.1f} KiB each; {before / 1024:.1f} MiB before, {after / 1024:.1f} MiB after); goal: at most {16 * count / 1000:.0f} MiB")
    for s in idle: s.close()
finally:
    daemon.send_signal(signal.SIGTERM)
    daemon.wait(timeout=20)
