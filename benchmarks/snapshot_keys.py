"""Which summary keys two api_snapshot files differ in, key by key (numbers at relative tolerance 1e-12).

    python benchmarks/snapshot_keys.py before.json.gz after.json.gz

`api_snapshot.py --compare` says which setups differ; this says which keys: for each key of the
inference / training summaries and plans, in how many of the compared records it changed, which keys
were added, and the keys that compare equal everywhere (benchmarks/data/SNAPSHOTS.md records the
result for each new baseline).
"""

from __future__ import annotations

import ast
import gzip
import json
import sys
from collections import Counter


def _value(text):
    try:
        return ast.literal_eval(text) if isinstance(text, str) else text
    except (ValueError, SyntaxError):
        return text


def _equal(a, b, rel: float = 1e-12) -> bool:
    a, b = _value(a), _value(b)
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b))
    return a == b or (numbers and abs(a - b) <= rel * max(abs(a), abs(b)))


def compare(before: dict, after: dict):
    changed, same, added = Counter(), Counter(), Counter()
    for setup, calls_before in before.items():
        calls_after = after.get(setup)
        if not isinstance(calls_before, dict) or not isinstance(calls_after, dict):
            continue
        for kind, rows in calls_before.items():
            if not isinstance(rows, list):
                continue
            for x, y in zip(rows, calls_after.get(kind, [])):
                if not isinstance(x, dict) or not isinstance(y, dict):
                    continue
                for key in set(x) | set(y):
                    if key not in x:
                        added[(kind, key)] += 1
                    elif key not in y:
                        changed[(kind, f"(removed) {key}")] += 1
                    else:
                        (same if _equal(x[key], y[key]) else changed)[(kind, key)] += 1
    return changed, same, added


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip())
        return 2
    before, after = (json.load(gzip.open(p)) for p in argv)
    changed, same, added = compare(before, after)
    print("added:", ", ".join(f"{kind}.{key} ({n})" for (kind, key), n in sorted(added.items())) or "none")
    print("changed (records changed / compared):")
    for (kind, key), n in sorted(changed.items()):
        print(f"  {kind}.{key}: {n}/{n + same[(kind, key)]}")
    equal = sorted(f"{kind}.{key}" for (kind, key) in same if (kind, key) not in changed)
    print(f"equal in every record ({len(equal)}): {', '.join(equal)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
