#!/usr/bin/env python3
"""Checks every Kubernetes manifest of deploy/kubernetes against the real schema of its kind, for
Kubernetes 1.34, strictly (an unknown field is an error): kubernetes-validate, offline. A List is
checked item by item; a kind of a custom resource (the Prometheus Operator's PodMonitor) has no
built-in schema and is left to the project's own manifest tests.

    scripts/check-manifests.py
"""
import glob, os, subprocess, sys, tempfile
import yaml

os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
VERSION = "1.34.0"
documents = []
for path in sorted(glob.glob("deploy/kubernetes/**/*.yaml", recursive=True)):
    for document in yaml.safe_load_all(open(path)):
        if not document:
            continue
        items = document.get("items", []) if document.get("kind") == "List" else [document]
        for index, item in enumerate(items):
            documents.append((path if len(items) == 1 else f"{path}[{index}]", item))

checked, failed = 0, []
with tempfile.TemporaryDirectory() as scratch:
    for name, document in documents:
        if "monitoring.coreos.com" in document.get("apiVersion", ""):
            continue
        file = os.path.join(scratch, f"{checked}.yaml")
        with open(file, "w") as out:
            yaml.safe_dump(document, out)
        result = subprocess.run(["kubernetes-validate", "--strict", "--quiet", "-k", VERSION, file], capture_output=True, text=True)
        output = (result.stdout + result.stderr).replace(file, name).strip()
        if result.returncode != 0 or output:
            failed.append(output or f"{name}: kubernetes-validate exited {result.returncode}")
        checked += 1
for failure in failed:
    print(failure)
if failed:
    sys.exit(f"check-manifests: {len(failed)} of {checked} manifests do not match Kubernetes {VERSION}'s schema")
print(f"check-manifests: {checked} manifests match Kubernetes {VERSION}'s schema, strictly")
