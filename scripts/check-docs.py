#!/usr/bin/env python3
"""Fails when the README or a page of docs/ points nowhere: every relative link must name a file
that exists, and every #anchor a heading of that file (GitHub's slugs); and when a generated
section is not current: the configuration reference (the key table's, `waf-tokend
--print-configuration-reference`; compared by a test, which has the table) and the module graph
(`scripts/check-imports.py`); and when a source file it names in code does not exist. Run by
`make test`.

    scripts/check-docs.py
"""
import glob, os, re, sys, unicodedata

os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
pages = ["README.md"] + sorted(glob.glob("docs/*.md"))


def slug(heading):
    text = re.sub(r"`|\*\*|\*|_(?=\w)|(?<=\w)_", "", heading.strip().lower())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = "".join(c for c in text if c.isalnum() or c in " -_" or unicodedata.category(c).startswith("L"))
    return text.replace(" ", "-")


def anchors(path):
    found, seen = set(), {}
    in_code = False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            in_code = not in_code
        if in_code:
            continue
        match = re.match(r"^#{1,6} (.+?)\s*$", line)
        if match:
            base = slug(match.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


problems = []
cache = {}
for page in pages:
    text = open(page, encoding="utf-8").read()
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        resolved = os.path.normpath(os.path.join(os.path.dirname(page), file)) if file else page
        if not os.path.exists(resolved):
            problems.append(f"{page}: the link {target} names {resolved}, which does not exist")
            continue
        if anchor and resolved.endswith(".md"):
            cache.setdefault(resolved, anchors(resolved))
            if anchor not in cache[resolved]:
                problems.append(f"{page}: the link {target} names no heading of {resolved}")
    # A source file the text names in code (`Module/Folder/File.swift`, or a core path without
    # its module) exists: a file moved to another folder takes its mentions along. A name that
    # starts with `+` continues the file named before it.
    for named in re.findall(r"`([A-Za-z0-9_][A-Za-z0-9_+./-]*\.swift)`", text):
        if "/" not in named:
            if not glob.glob(f"**/{named}", recursive=True):
                problems.append(f"{page}: names {named}, which no folder holds")
        elif not any(os.path.exists(root + named) for root in ("", "Sources/", "Sources/WAFTokenCore/", "Tests/")):
            problems.append(f"{page}: names {named}, which does not exist under Sources/ or Tests/")
for problem in problems:
    print(problem)
if problems:
    sys.exit(f"check-docs: {len(problems)} broken link(s)")
print(f"check-docs: every link of {len(pages)} pages resolves")
