#!/usr/bin/env python3
"""Runs the test suite N times (as `make test` runs it, builds done once) and prints, per test,
in how many runs it failed: the way to hunt a flake (docs/development.md).

    scripts/test-repeat.py N [--filter REGEX]

Each run's whole output is kept in .build/test-repeat/run-K.log. A run stopped by a test that
outlived its bound (WAFTestTraits) counts as a failure of that test."""
import argparse
import collections
import os
import re
import subprocess
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("runs", type=int)
parser.add_argument("--filter", help="only the tests whose id matches (swift test --filter)")
arguments = parser.parse_args()

os.chdir(os.path.join(os.path.dirname(__file__), ".."))
swift = os.environ.get("SWIFT", "swift")
logs = ".build/test-repeat"
os.makedirs(logs, exist_ok=True)

if arguments.filter:
    invocations = [["--filter", arguments.filter, "--skip", "WAFPackageTests"]]
else:
    invocations = [["--skip", "WAFReliabilityTests", "--skip", "WAFPackageTests"], ["--filter", "WAFReliabilityTests"]]

failed_test = re.compile(r'^✘ Test "?(.+?)"? (?:failed after|recorded an issue)')
stopped = re.compile(r'^✘ Test "(.+)" did not end within its bound')
failures = collections.Counter()
for run in range(1, arguments.runs + 1):
    started = time.monotonic()
    names = set()
    codes = []
    with open(f"{logs}/run-{run}.log", "w") as log:
        for extra in invocations:
            # Through swift-test.sh: a run that crashes leaves no daemon behind for the next one.
            result = subprocess.run(["scripts/swift-test.sh", "--skip-build", *extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(os.environ, SWIFT=swift))
            log.write(result.stdout)
            codes.append(result.returncode)
            for line in result.stdout.splitlines():
                match = stopped.match(line) or failed_test.match(line)
                if match:
                    names.add(match.group(1))
    if any(codes) and not names:
        names.add("(the run failed without naming a test: see the log)")
    failures.update(names)
    verdict = "green" if not any(codes) else f"red: {len(names)} failing"
    print(f"run {run}/{arguments.runs}: {verdict} in {time.monotonic() - started:.0f} s ({logs}/run-{run}.log)", flush=True)

print()
if not failures:
    print(f"every test passed in all {arguments.runs} runs")
    sys.exit(0)
print(f"failed runs per test, of {arguments.runs}:")
for name, count in failures.most_common():
    print(f"  {count}  {name}")
sys.exit(1)
