#!/usr/bin/env python3
"""Lists or runs the benchmark commands of docs/performance.md.

docs/performance.md keeps its figures in Markdown tables whose header is
`| figure | command | value | goal |`, under `## <area>` headings. This script reads those tables
and, for each distinct command:

  --dry-run  prints the command and the figures it measures (with their current values);
  --run      runs it and prints its raw output, followed by the figures the table holds for it.

It never edits the document: the bench modes print their figures in their own formats (and some
figures are derived from several runs or from a profile), so comparing the output with the table
and updating the values is left to the reader.

    python3 docs/tools/performance-table.py --dry-run
    python3 docs/tools/performance-table.py --dry-run --only echo
    python3 docs/tools/performance-table.py --run --only "plugin dispatch"
    python3 docs/tools/performance-table.py --run --only relay-store --postgres postgresql://postgres@127.0.0.1:5432/postgres

`--only SUBSTRING` keeps the rows whose area, figure or command contains it (case-insensitive).
In a command, the word `swiftplex-bench` is replaced by `--bench` (default
`.build/release/swiftplex-bench`: `swift build -c release --product swiftplex-bench`), and the
placeholder `postgresql://USER@HOST:PORT/DB` by `--postgres` (commands that need it are skipped
without it). Commands that start with another program (`taskset`, `perf`, `/usr/bin/time`) are run
as written if that program is installed, and skipped otherwise.
"""
import argparse
import os
import shlex
import shutil
import signal
import subprocess
import sys

HEADER = ["figure", "command", "value", "goal"]
BENCH_WORD = "swiftplex-bench"
POSTGRES_PLACEHOLDER = "postgresql://USER@HOST:PORT/DB"
DEFAULT_DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "performance.md")


def cells(line):
    """The cells of a Markdown table row (no pipes inside cells in this document)."""
    inner = line.strip()
    if inner.startswith("|"):
        inner = inner[1:]
    if inner.endswith("|"):
        inner = inner[:-1]
    return [c.strip() for c in inner.split("|")]


def unquote(cell):
    """The text inside the first pair of backticks, or the cell as it is."""
    if cell.count("`") >= 2:
        start = cell.index("`") + 1
        return cell[start:cell.index("`", start)].strip()
    return cell


def read_rows(path):
    """(area, figure, command, value, goal, line number) of every row of every figure table."""
    rows, area, in_table = [], "", False
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if stripped.startswith("## "):
            area, in_table = stripped[3:].strip(), False
            continue
        if not stripped.startswith("|"):
            in_table = False
            continue
        row = cells(stripped)
        if [c.lower() for c in row] == HEADER:
            in_table = True
            continue
        if not in_table or set("".join(row)) <= set("-: "):
            continue  # another table, or the separator row
        if len(row) != len(HEADER):
            sys.exit(f"{path}:{number}: a figure row needs {len(HEADER)} cells, found {len(row)}")
        figure, command, value, goal = row
        rows.append((area, figure, unquote(command), value, goal, number))
    return rows


def argv_for(command, bench, postgres):
    """The argument vector to run, or (None, reason) when it cannot be run here."""
    if POSTGRES_PLACEHOLDER in command:
        if not postgres:
            return None, "needs --postgres URL"
        command = command.replace(POSTGRES_PLACEHOLDER, postgres)
    argv = [bench if word == BENCH_WORD else word for word in shlex.split(command)]
    if BENCH_WORD in shlex.split(command) and not (os.path.isfile(bench) and os.access(bench, os.X_OK)):
        return None, f"no executable {bench} (swift build -c release --product swiftplex-bench, or --bench PATH)"
    if argv[0] != bench and shutil.which(argv[0]) is None:
        return None, f"{argv[0]} is not installed"
    return argv, None


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends the listing quietly
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--dry-run", action="store_true", help="list the commands and their figures; run nothing")
    mode.add_argument("--run", action="store_true", help="run each distinct command and print its raw output")
    parser.add_argument("--only", metavar="SUBSTRING", help="keep rows whose area, figure or command contains it")
    parser.add_argument("--bench", default=".build/release/swiftplex-bench", help="the swiftplex-bench binary")
    parser.add_argument("--postgres", metavar="URL", help="a PostgreSQL server for the commands that need one")
    parser.add_argument("--doc", default=DEFAULT_DOC, help="the document to read (default docs/performance.md)")
    args = parser.parse_args()

    rows = read_rows(args.doc)
    if args.only:
        needle = args.only.lower()
        rows = [r for r in rows if needle in r[0].lower() or needle in r[1].lower() or needle in r[2].lower()]
    if not rows:
        sys.exit("no figure rows match")

    commands = {}  # command → its rows, in the document's order
    for row in rows:
        commands.setdefault(row[2], []).append(row)

    failed = 0
    for command, its_rows in commands.items():
        print(f"=== {command}")
        if args.run:
            argv, reason = argv_for(command, args.bench, args.postgres)
            if argv is None:
                print(f"--- skipped: {reason}")
            else:
                sys.stdout.flush()
                status = subprocess.run(argv).returncode
                if status != 0:
                    failed += 1
                    print(f"--- exit status {status}")
            print("--- the table's figures for this command (compare with the output above; the table is not changed):")
        for area, figure, _, value, goal, number in its_rows:
            goal_text = "" if goal in ("—", "-", "") else f"   [goal {goal}]"
            print(f"  {area} / {figure}: {value}{goal_text}   (line {number})")
        print()
    print(f"{len(commands)} command(s), {len(rows)} figure(s)" + (f", {failed} failed" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
