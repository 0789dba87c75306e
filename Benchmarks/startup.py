"""Exec → READY=1, timed from outside: for each run, a fresh notify socket, the clock read just
before the child is spawned and again when READY=1 arrives, then SIGTERM and a wait for the exit.
Prints "median p10 p90" in milliseconds. Given several programs (separated by `--`), runs them
alternately, one run of each in turn, and prints a line for each; the lines after the first end
with the spread of its ratio to the first program, run by run (lowest-highest).

    python3 Benchmarks/startup.py RUNS PROGRAM [ARGUMENTS...] [-- PROGRAM [ARGUMENTS...]]...
"""
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

runs = int(sys.argv[1])
programs = [[]]
for argument in sys.argv[2:]:
    if argument == "--":
        programs.append([])
    else:
        programs[-1].append(argument)
times = [[] for _ in programs]


def start(argv, path):
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
        notify.bind(path)
        notify.settimeout(10)
        environment = dict(os.environ, NOTIFY_SOCKET=path)
        began = time.perf_counter_ns()
        child = subprocess.Popen(argv, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while b"READY=1" not in notify.recv(4096):
                pass
        except socket.timeout:
            sys.exit(f"error: {argv[0]} sent no READY=1 within 10 s")
        elapsed = (time.perf_counter_ns() - began) / 1e6
        child.send_signal(signal.SIGTERM)
        child.wait(timeout=10)
        return elapsed


with tempfile.TemporaryDirectory() as directory:
    for run in range(runs):
        for index, argv in enumerate(programs):
            times[index].append(start(argv, os.path.join(directory, f"notify-{run}-{index}")))
for index, measured in enumerate(times):
    ordered = sorted(measured)
    line = f"{statistics.median(ordered):.2f} {ordered[len(ordered) // 10]:.2f} {ordered[(len(ordered) * 9) // 10]:.2f}"
    if index > 0:
        ratios = [a / b for a, b in zip(measured, times[0])]
        line += f" {min(ratios):.2f}-{max(ratios):.2f}"
    print(line)
