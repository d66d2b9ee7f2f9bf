"""``results/records.jsonl``: one JSON line per measurement, appended by the tools that measure.

A record is compact: what was measured and where, and its headline figures. The benchmark's own
JSON output (every sample, phase and counter) and a run's folder stay where the command wrote
them and are not committed.

    {"id": ..., "kind": "env", "date": "2026-12-05", "gpu": "NVIDIA H200", "cpu": ..., "caches": "warm",
     "commit": "322ae37", "command": "unilab-bench env ...", "source": ..., "subject": {...}, "figures": {...}}

``kind`` is one of KINDS; ``subject`` says what ran (task, backend, algorithm, envs, seed, preset,
overrides), ``figures`` what it measured (the keys each kind carries: ``unilab_bench.results.records``).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[4]
STORE = ROOT / "results" / "records.jsonl"
KINDS = ("training", "env", "collector", "matrix", "compare")
# Every record has these keys, in this order (None where a value is unknown or does not apply).
FIELDS = ("id", "kind", "date", "gpu", "cpu", "caches", "commit", "command", "source", "subject", "figures")
CACHES = ("warm", "cold", None)
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def check_record(record: dict[str, Any]) -> None:
    """Raise ValueError naming what is wrong with a record (before anything is written)."""
    missing = [f for f in FIELDS if f not in record]
    extra = [f for f in record if f not in FIELDS]
    if missing or extra:
        raise ValueError(f"record {record.get('id')!r}: missing {missing}, unknown {extra}")
    if record["kind"] not in KINDS:
        raise ValueError(f"record {record['id']!r}: kind {record['kind']!r} is not one of {', '.join(KINDS)}")
    if not isinstance(record["date"], str) or not DATE.match(record["date"]):
        raise ValueError(f"record {record['id']!r}: date {record['date']!r} is not YYYY-MM-DD")
    if record["caches"] not in CACHES:
        raise ValueError(f"record {record['id']!r}: caches {record['caches']!r} is not warm, cold or null")
    for key in ("subject", "figures"):
        if not isinstance(record[key], dict):
            raise ValueError(f"record {record['id']!r}: {key} must be an object")
    if not record["figures"]:
        raise ValueError(f"record {record['id']!r}: no figures")
    if not isinstance(record["id"], str) or not record["id"]:
        raise ValueError("record without an id")


def record_id(record: dict[str, Any]) -> str:
    """``kind-date-slug-hash``: the slug says what it is, the hash of its content keeps it unique."""
    subject = record.get("subject") or {}
    parts = [subject.get(k) for k in ("task", "algo", "backend", "num_envs")]
    gpu = short_device(record.get("gpu"), record.get("cpu"))
    seed = subject.get("seed")
    slug = "-".join(str(p) for p in [*parts, gpu, None if seed is None else f"s{seed}"] if p is not None)
    body = {k: record.get(k) for k in FIELDS if k != "id"}
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:6]
    slug = re.sub(r"[^a-z0-9_.-]+", "-", slug.lower()).strip("-")
    return f"{record['kind']}-{record['date']}-{slug}-{digest}" if slug else f"{record['kind']}-{record['date']}-{digest}"


def short_device(gpu: str | None, cpu: str | None = None) -> str:
    """"H200" for "NVIDIA H200", "H100" for "NVIDIA H100 80GB HBM3"; "cpu" without a GPU."""
    if not gpu:
        return "cpu"
    match = re.search(r"\b([A-Z]{1,2}\d{2,4}[A-Z]?)\b", gpu)
    return match[1] if match else gpu


def make_record(kind: str, date: str, subject: dict[str, Any], figures: dict[str, Any], *, gpu: str | None = None,
                cpu: str | None = None, caches: str | None = None, commit: str | None = None,
                command: str | None = None, source: str | None = None) -> dict[str, Any]:
    record = {"id": "", "kind": kind, "date": date, "gpu": gpu, "cpu": cpu, "caches": caches, "commit": commit,
              "command": command, "source": source, "subject": subject, "figures": figures}
    record["id"] = record_id(record)
    check_record(record)
    return record


def dumps(record: dict[str, Any]) -> str:
    """One line, keys in FIELDS order."""
    return json.dumps({k: record[k] for k in FIELDS}, separators=(",", ":"), allow_nan=False)


def append(path: Path | str, record: dict[str, Any]) -> dict[str, Any]:
    """Append ``record`` to the store at ``path`` (created with its folder if absent) and return
    it. A record whose id is already there is refused: the same measurement is not counted twice."""
    path = Path(path)
    check_record(record)
    line = dumps(record)
    if path.exists() and record["id"] in {r["id"] for r in read(path)}:
        raise ValueError(f"{path}: already holds a record {record['id']!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as out:
        out.write(line + "\n")
    return record


def read(path: Path | str = STORE) -> list[dict[str, Any]]:
    """Every record of the store, in the order appended; a damaged line raises naming its number."""
    path = Path(path)
    if not path.exists():
        return []
    records = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            check_record(record)
        except (json.JSONDecodeError, ValueError) as error:
            raise ValueError(f"{path}:{number}: {error}") from error
        records.append(record)
    ids = [r["id"] for r in records]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{path}: repeated ids {sorted({i for i in ids if ids.count(i) > 1})}")
    return records
