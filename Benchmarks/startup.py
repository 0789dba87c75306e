"""Exec → READY=1, timed from outside: for each run, a fresh notify socket, the clock read just
before the child is spawned and again when READY=1 arrives, then SIGTERM and a wait for the exit.
Prints "median p10 p90" in milliseconds.

    python3 Benchmarks/startup.py RUNS PROGRAM [ARGUMENTS...]
"""
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

runs, argv = int(sys.argv[1]), sys.argv[2:]
times = []
with tempfile.TemporaryDirectory() as directory:
    for run in range(runs):
        path = os.path.join(directory, f"notify-{run}")
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
            notify.bind(path)
            notify.settimeout(10)
            environment = dict(os.environ, NOTIFY_SOCKET=path)
            start = time.perf_counter_ns()
            child = subprocess.Popen(argv, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                while b"READY=1" not in notify.recv(4096):
                    pass
            except socket.timeout:
                sys.exit(f"error: {argv[0]} sent no READY=1 within 10 s")
            times.append((time.perf_counter_ns() - start) / 1e6)
            child.send_signal(signal.SIGTERM)
            child.wait(timeout=10)
times.sort()
print(f"{statistics.median(times):.2f} {times[len(times) // 10]:.2f} {times[(len(times) * 9) // 10]:.2f}")
