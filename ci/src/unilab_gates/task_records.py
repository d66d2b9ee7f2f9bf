"""Gate: every built-in task's semantics match its record in contracts/tasks/.

A record is the task's resolved configuration as stable data (``unilab.fingerprint``) and
its sha256. Changing what a task computes (a term, a parameter, a weight) without updating
the record fails with the keys that changed; ``--update`` rewrites the records after a
deliberate change, so the change shows in review as a diff of the record.

    python -m unilab_gates.task_records [--update]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

RECORD_DIR = Path("contracts") / "tasks"


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: value}


def changed_keys(recorded: dict[str, Any], current: dict[str, Any]) -> list[str]:
    a, b = _flatten(recorded), _flatten(current)
    return sorted(k for k in set(a) | set(b) if a.get(k, "<absent>") != b.get(k, "<absent>"))


def check_tasks(root: Path, update: bool = False, tasks: list[str] | None = None) -> list[str]:
    from unilab.fingerprint import record_fingerprint, task_record
    from unilab.registry import builtin_tasks

    errors = []
    directory = root / RECORD_DIR
    names = tasks if tasks is not None else builtin_tasks()
    for task in names:
        record = task_record(task)
        document = {"task": task, "fingerprint": record_fingerprint(record), "config": record["config"]}
        path = directory / f"{task}.json"
        if update:
            directory.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
            continue
        if not path.is_file():
            errors.append(f"{task}: no record at {path.relative_to(root)}; run python -m unilab_gates.task_records "
                          "--update and commit it")
            continue
        recorded = json.loads(path.read_text())
        if recorded.get("fingerprint") != document["fingerprint"]:
            keys = changed_keys(recorded.get("config", {}), document["config"])
            shown = ", ".join(keys[:8]) + (f" and {len(keys) - 8} more" if len(keys) > 8 else "")
            errors.append(f"{task}: its semantics changed without its record ({path.relative_to(root)}): "
                          f"{shown or 'the record itself'}; if intended, run python -m unilab_gates.task_records "
                          "--update")
    if tasks is None and not update:
        stale = sorted(p.stem for p in directory.glob("*.json") if p.stem not in names)
        errors += [f"{t}: a record exists but no such task is registered" for t in stale]
    return errors


def main(argv: list[str] | None = None) -> int:
    from unilab_gates.manifests import find_root

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true")
    args = parser.parse_args(argv)
    root = find_root()
    errors = check_tasks(root, update=args.update)
    for e in errors:
        print(e, file=sys.stderr)
    if not errors:
        print("task records match: " + ("updated" if args.update else "every built-in task"))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
