#!/usr/bin/env python3
"""Checks that every relative Markdown link to a .md file resolves.

    python3 docs/tools/check-links.py            # README.md and docs/*.md
    python3 docs/tools/check-links.py FILE...

For each `](something.md)` or `](something.md#anchor)` link (not http:, https: or mailto:), the
file named relative to the linking document must exist. Prints each broken link as
FILE:LINE: target and exits 1 if there is any.
"""
import glob
import os
import re
import sys

LINK = re.compile(r"\]\(([^)\s]+?\.md)(#[^)\s]*)?\)")


def main(paths):
    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    if not paths:
        paths = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    broken, checked = 0, 0
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                for target, _ in LINK.findall(line):
                    if re.match(r"^[a-z]+:", target):
                        continue
                    checked += 1
                    if not os.path.isfile(os.path.join(os.path.dirname(path), target)):
                        broken += 1
                        print(f"{os.path.relpath(path, root)}:{number}: {target}")
    print(f"{checked} links checked in {len(paths)} files, {broken} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
