#!/usr/bin/env python3
"""Reads test logs for the reports of SWIFTPLEX_BLOCKING_CHECK=log (a blocking wait entered on
Swift's concurrency pool, with the raw call stack) and prints each call site once with its stack
resolved to functions and source lines (addr2line, swift demangle).

A wait whose stack reaches no test code was made by Swiftplex's own code: the script then exits 1.
A wait a test made by calling a blocking API from a task is listed as a note.
Usage: Tests/Support/blocking_report.py LOG...
"""

import collections
import re
import subprocess
import sys

REPORT = "blocking wait on the Swift concurrency pool"
FRAME = re.compile(r"^  (/[^(]+)\(\+(0x[0-9a-f]+)\)")
# A frame in the tests' sources, or in a macro expanded in a test module.
TEST_CODE = re.compile(r"/Tests/|in module \w+Tests file ")
SKIP = ("libswift_Concurrency", "libdispatch", "libc.so", "libFoundation")


def reports(paths):
    """(message, [(binary, offset)]) for each report in the logs."""
    out = []
    for path in paths:
        current = None
        with open(path, errors="replace") as f:
            for line in f:
                line = line.rstrip("\n")
                if REPORT in line:
                    current = (line[line.index(REPORT):], [])
                    out.append(current)
                elif current is not None and (m := FRAME.match(line)):
                    if not any(s in m.group(1) for s in SKIP):
                        current[1].append((m.group(1), m.group(2)))
                else:
                    current = None
    return out


def resolve(frames):
    """{(binary, offset): "function  at file:line"}, one addr2line run per binary."""
    by_binary = collections.defaultdict(list)
    for binary, offset in frames:
        by_binary[binary].append(offset)
    names = {}
    for binary, offsets in by_binary.items():
        offsets = sorted(set(offsets))
        try:
            raw = subprocess.run(["addr2line", "-e", binary, "-f"] + offsets, capture_output=True, text=True).stdout.splitlines()
            demangled = subprocess.run(["swift", "demangle", "--simplified"], input="\n".join(raw), capture_output=True,
                                       text=True).stdout.splitlines()
        except OSError:
            demangled = []
        if len(demangled) != 2 * len(offsets):
            demangled = [f"{binary}+{o}" for o in offsets for _ in (0, 1)]
        for i, offset in enumerate(offsets):
            names[(binary, offset)] = f"{demangled[2 * i][:160]}  at {demangled[2 * i + 1]}"
    return names


def main():
    found = reports(sys.argv[1:])
    names = resolve([f for _, frames in found for f in frames])
    seen = set()
    product, tests = [], []
    for message, frames in found:
        stack = [names[f] for f in frames]
        key = (message, tuple(stack))
        if key in seen:
            continue
        seen.add(key)
        entry = message + "".join("\n    " + s for s in stack)
        (tests if any(TEST_CODE.search(s) for s in stack) else product).append(entry)
    if tests:
        # One line per test function (the first test frame of each stack), not every stack.
        callers = sorted({next(s for s in e.split("\n    ")[1:] if TEST_CODE.search(s)).split("  at ")[0][:120] for e in tests})
        print(f"note: {len(tests)} call site(s) where test code called a blocking API from a task, in {len(callers)} test function(s):")
        for c in callers:
            print("  " + c)
    if product:
        print("################################################################")
        print(f"# {len(product)} blocking wait(s) on Swift's concurrency pool made by Swiftplex's own code")
        print('# (docs/architecture.md, "Blocking work"):')
        for e in product:
            print(e)
        print("################################################################")
        return 1
    print("blocking check: no blocking wait on Swift's concurrency pool by Swiftplex's own code")
    return 0


if __name__ == "__main__":
    sys.exit(main())
