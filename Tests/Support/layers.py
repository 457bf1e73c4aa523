"""Checks that `Sources/` keeps its layers (Package.swift's `layers` table): every module in
`Sources/<layer>/<module>` is a target of that table, and each depends only on modules of its own
layer or of the layers listed before it; and that `Tests/` mirrors it (the `testLayers` table
places every test target); and that the PostgreSQL driver (SwiftplexSQLPostgres) is passed in by
the programs, not imported by the engine or the host: only the programs, the libsimplex edge that
acts as one, and the relay's own PostgreSQL store depend on it. Run by `make test` (prints `layers: N modules in L
layers, dependencies point up`) and exits non-zero, naming each edge that points down.

Usage: python3 Tests/Support/layers.py PACKAGE_DUMP.json  (the output of `swift package dump-package`)
"""

import json
import os
import re
import sys

# The PostgreSQL driver, and the modules besides the programs that may link it.
DRIVER = "SwiftplexSQLPostgres"
DRIVER_USERS = {"RelayPostgres", "SimplexLib"}

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def layer_order(name="layers"):
    text = open(os.path.join(ROOT, "Package.swift"), encoding="utf-8").read()
    table = re.search(r"let " + name + r": KeyValuePairs<String, \[String\]> = \[(.*?)\n\]", text, re.S)
    if not table:
        sys.exit(f"layers: Package.swift has no `let {name}` table")
    return [(m.group(1), re.findall(r'"([^"]+)"', m.group(2))) for m in re.finditer(r'"(\w+)": \[([^\]]*)\]', table.group(1))]


def main():
    dump = json.load(open(sys.argv[1], encoding="utf-8"))
    order = layer_order()
    index = {module: i for i, (_, modules) in enumerate(order) for module in modules}
    problems = []
    for i, (layer, modules) in enumerate(order):
        folder = os.path.join(ROOT, "Sources", layer)
        on_disk = sorted(d for d in os.listdir(folder) if os.path.isdir(os.path.join(folder, d))) if os.path.isdir(folder) else []
        for stray in sorted(set(on_disk) - set(modules)):
            problems.append(f"Sources/{layer}/{stray} is in no layer of Package.swift's table")
    for entry in sorted(os.listdir(os.path.join(ROOT, "Sources"))):
        if entry not in {layer for layer, _ in order}:
            problems.append(f"Sources/{entry} is not a layer (Package.swift's `layers` table)")
    test_order = layer_order("testLayers")
    placed = {module for _, modules in test_order for module in modules}
    for layer, modules in test_order:
        folder = os.path.join(ROOT, "Tests", layer)
        if layer != "Support" and os.path.isdir(folder):
            for stray in sorted(set(d for d in os.listdir(folder) if os.path.isdir(os.path.join(folder, d))) - set(modules)):
                problems.append(f"Tests/{layer}/{stray} is in no layer of Package.swift's testLayers table")
    for target in dump["targets"]:
        name = target["name"]
        if target.get("type") == "test" and name not in placed:
            problems.append(f"the test target {name} is in no layer of Package.swift's testLayers table")
        if name not in index:
            continue
        for dependency in target.get("dependencies", []):
            kind, value = next(iter(dependency.items()))
            used = value[0] if isinstance(value, list) else None
            if kind in ("byName", "target") and used in index and index[used] > index[name]:
                problems.append(f"{name} ({order[index[name]][0]}) depends on {used} ({order[index[used]][0]}), a layer below it")
            if kind in ("byName", "target") and used == DRIVER and name not in DRIVER_USERS and order[index[name]][0] != "Programs":
                problems.append(f"{name} depends on {DRIVER}: the PostgreSQL backend is passed in by the programs (SQLBackends.use)")
    if problems:
        for p in problems:
            print(f"layers: {p}")
        sys.exit(1)
    print(f"layers: {len(index)} modules in {len(order)} layers, dependencies point up, {DRIVER} passed in by the programs")


if __name__ == "__main__":
    main()
