"""Exec → exit of short commands, alternating, timed from outside: for each run the clock just
before the child is spawned and again after it is reaped, and its CPU time (user + system, from
the kernel's accounting of the reaped child). Every command must print something on stdout and
exit 0 (a check that it did its work). Prints one line per command: "median p10 p90 cpu_median"
in milliseconds, and the spread of the wall-time ratio of each later command to the first (run by
run: lowest–highest).

    python3 Benchmarks/exec-time.py RUNS -- COMMAND... -- COMMAND...
"""
import os
import statistics
import subprocess
import sys
import time

runs = int(sys.argv[1])
commands, current = [], None
for argument in sys.argv[2:]:
    if argument == "--":
        current = []
        commands.append(current)
    else:
        current.append(argument)
walls = [[] for _ in commands]
cpus = [[] for _ in commands]
for run in range(runs + 2):
    for index, argv in enumerate(commands):
        start = time.perf_counter_ns()
        child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        output = child.stdout.read()
        # wait4: the child's own CPU time, to the microsecond (os.times() counts in clock ticks).
        _, status, usage = os.wait4(child.pid, 0)
        wall = (time.perf_counter_ns() - start) / 1e6
        child.returncode = os.waitstatus_to_exitcode(status)
        child.stdout.close()
        if child.returncode != 0 or not output:
            sys.exit(f"error: {' '.join(argv)} exited {child.returncode} with {len(output)} bytes on stdout")
        if run < 2:
            continue  # the page cache and the caches of the machine's own
        walls[index].append(wall)
        cpus[index].append((usage.ru_utime + usage.ru_stime) * 1000)
for index in range(len(commands)):
    times = sorted(walls[index])
    spread = ""
    if index > 0:
        ratios = [a / b for a, b in zip(walls[index], walls[0])]
        spread = f" {min(ratios):.2f}-{max(ratios):.2f}"
    print(f"{statistics.median(times):.2f} {times[len(times) // 10]:.2f} {times[(len(times) * 9) // 10]:.2f} {statistics.median(cpus[index]):.2f}{spread}")
