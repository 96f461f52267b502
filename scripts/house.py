#!/usr/bin/env python3
"""The house's figures, checked: no import circle, no source file over its length, a README that
stays a guide. CI runs it (`.ci/run`); it exits 1 on a breach, saying where the thing should go.

    python3 scripts/house.py            # check, print the figures
    python3 scripts/house.py --figures  # print them only

Every threshold is here, and so is every debt not paid yet (none since 2026-11-28): a circle or
a long file listed in DEBTS may stay as it is or shrink, never grow; anything new fails. Paying a
debt means deleting its line here.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from structure import Crate, drawing, folders  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# The crates whose files and folders must not import in a circle.
CRATES = ["framework/src", "trainer/src", "datasets/src"]
# Where source files may not pass MAX_LINES lines (tests included).
SOURCES = ["framework", "trainer", "datasets", "tests", "examples"]
MAX_LINES = 450
README_MAX = 500

# Debts, as of the last round: circles (their files, sorted) and files with their lines then.
DEBTS = {
    "circles": [],
    "long files": {},
}


def circles():
    """Every circle of files, and of top-level folders, in CRATES: (crate, members) pairs."""
    found = []
    for root in CRATES:
        crate = Crate(str(ROOT / root))
        edges = crate.edges()
        files, _, _ = drawing(list(crate.files), edges, crate.name)
        found += [(root, tuple(sorted(c))) for c in files]
        by_folder, _, _ = drawing(*folders(crate, edges))
        found += [(root + " (folders)", tuple(sorted(c))) for c in by_folder]
    return found


def long_files():
    """Every .rs file under SOURCES over MAX_LINES lines: path to its line count."""
    found = {}
    for source in SOURCES:
        for path in sorted((ROOT / source).rglob("*.rs")):
            if "target" in path.parts:
                continue
            lines = len(path.read_text(errors="replace").splitlines())
            if lines > MAX_LINES:
                found[str(path.relative_to(ROOT))] = lines
    return found


def main():
    breaches = []
    known = [set(c.split(" <-> ")) for c in DEBTS["circles"]]
    found = circles()
    for crate, members in found:
        print(f"circle in {crate}: {' <-> '.join(members)}")
        # A debt may shrink: a circle within a known one is that one, smaller.
        if not any(set(members) <= debt for debt in known):
            breaches.append(
                f"{crate}: a new circle, {' <-> '.join(members)}: move what the files share down "
                "into a file (or folder) of its own that each imports, so that imports only go down"
            )
    for path, lines in long_files().items():
        print(f"long file: {path}, {lines} lines")
        allowed = DEBTS["long files"].get(path)
        if allowed is None or lines > allowed:
            limit = MAX_LINES if allowed is None else allowed
            breaches.append(
                f"{path} has {lines} lines, over {limit}: the next concept gets a file of its own "
                "(split where the concepts are, not in halves; ../shared/STYLE.md)"
            )
    readme = len((ROOT / "README.md").read_text().splitlines())
    print(f"README.md: {readme} lines (at most {README_MAX})")
    if readme > README_MAX:
        breaches.append(
            f"README.md has {readme} lines, over {README_MAX}: long guides go to docs/ (indexed in "
            "docs/README.md), measurements to bench/RESULTS.md"
        )
    print(f"{len(found)} circles, {len(long_files())} files over {MAX_LINES} lines")
    if "--figures" in sys.argv[1:]:
        return 0
    for breach in breaches:
        print(f"house: {breach}", file=sys.stderr)
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main())
