"""Contract manifests vs code: fail when they drift apart without a version bump.

Each ``[contracts.<name>]`` in workspace.toml names a JSON manifest. A manifest holds the
contract's version, the module attribute that carries the version in code, its public
surface (exported names; for each listed class its public members with signatures, or its
dataclass/Protocol fields), its semantics in words, and ``released``: the sha256 of the
surface recorded for each version.

Checks: code surface == manifest surface; code version == manifest version == workspace
version; the surface hash is the one recorded for that version (so changing the surface
means recording a new version).

    python -m unilab_gates.manifests            # check every contract
    python -m unilab_gates.manifests --update   # rewrite surfaces from code; refuses to
                                                # change a released version's surface
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import hashlib
import importlib
import inspect
import json
import sys
import tomllib
from pathlib import Path


def _public_members(cls: type) -> dict[str, str]:
    if issubclass(cls, enum.Enum):
        return {m.name: f"enum member: {m.value!r}" for m in cls}
    members: dict[str, str] = {}
    if dataclasses.is_dataclass(cls):
        for f in dataclasses.fields(cls):
            members[f.name] = f"field: {f.type}"
    annotations = {}
    for klass in reversed(cls.__mro__):
        if klass is object:
            continue
        annotations.update(getattr(klass, "__annotations__", {}))
    for name, annotation in annotations.items():
        if not name.startswith("_") and name not in members:
            members[name] = f"attribute: {annotation}"
    for name, value in inspect.getmembers(cls):
        if name.startswith("_") or name in members:
            continue
        raw = inspect.getattr_static(cls, name)
        if isinstance(raw, property):
            members[name] = "property"
        elif callable(value):
            try:
                members[name] = f"method{inspect.signature(value)}"
            except (TypeError, ValueError):
                members[name] = "method"
    return dict(sorted(members.items()))


def code_surface(manifest: dict) -> dict:
    module = importlib.import_module(manifest["module"])
    classes = {}
    for qualname in manifest["surface"]["classes"]:
        obj = getattr(module, qualname)
        classes[qualname] = _public_members(obj)
    functions = {name: f"{inspect.signature(getattr(module, name))}" for name in manifest["surface"]["functions"]}
    return {"exports": sorted(getattr(module, "__all__", [])), "classes": classes, "functions": functions}


def surface_hash(surface: dict) -> str:
    return hashlib.sha256(json.dumps(surface, sort_keys=True).encode()).hexdigest()


def _diff(want: dict, got: dict, prefix: str = "") -> list[str]:
    lines = []
    for key in sorted(set(want) | set(got)):
        path = f"{prefix}{key}"
        if key not in got:
            lines.append(f"  {path}: in manifest, missing in code")
        elif key not in want:
            lines.append(f"  {path}: in code, missing in manifest")
        elif isinstance(want[key], dict) and isinstance(got[key], dict):
            lines.extend(_diff(want[key], got[key], path + "."))
        elif want[key] != got[key]:
            lines.append(f"  {path}: manifest {want[key]!r} != code {got[key]!r}")
    return lines


def check_contract(name: str, entry: dict, root: Path, update: bool = False) -> list[str]:
    path = root / entry["manifest"]
    manifest = json.loads(path.read_text())
    module = importlib.import_module(manifest["module"])
    code_version = getattr(module, manifest["version_attr"])
    errors = []
    if not (code_version == manifest["version"] == entry["version"]):
        errors.append(f"{name}: versions disagree: code {manifest['module']}.{manifest['version_attr']}="
                      f"{code_version}, manifest {manifest['version']}, workspace.toml {entry['version']}")
    got = code_surface(manifest)
    if update:
        released = {r["version"]: r["surface_sha256"] for r in manifest["released"]}
        recorded = released.get(code_version)
        if recorded is not None and recorded != surface_hash(got):
            return [f"{name}: the surface of released version {code_version} would change; bump "
                    f"{manifest['module']}.{manifest['version_attr']} (and workspace.toml) first"]
        manifest["surface"] = got
        manifest["version"] = code_version
        if recorded is None:
            manifest["released"].append({"version": code_version, "surface_sha256": surface_hash(got)})
        path.write_text(json.dumps(manifest, indent=2) + "\n")
        return errors
    drift = _diff(manifest["surface"], got)
    if drift:
        errors.append(f"{name}: code and {entry['manifest']} drift apart:\n" + "\n".join(drift)
                      + "\n  update the manifest (python -m unilab_gates.manifests --update) and, if the "
                        "surface changed, bump the contract version")
    recorded = {r["version"]: r["surface_sha256"] for r in manifest["released"]}.get(manifest["version"])
    if recorded != surface_hash(manifest["surface"]):
        errors.append(f"{name}: manifest surface does not match the hash released for version "
                      f"{manifest['version']} (surface changed without a version bump)")
    return errors


def find_root() -> Path:
    for parent in [Path.cwd(), *Path.cwd().parents]:
        if (parent / "workspace.toml").is_file():
            return parent
    raise SystemExit("workspace.toml not found above the current directory")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true")
    parser.add_argument("--contract", action="append", help="only these contracts (default: all)")
    args = parser.parse_args(argv)
    root = find_root()
    contracts = tomllib.loads((root / "workspace.toml").read_text())["contracts"]
    if args.contract:
        contracts = {k: v for k, v in contracts.items() if k in args.contract}
    errors = []
    for name, entry in contracts.items():
        errors.extend(check_contract(name, entry, root, update=args.update))
    for e in errors:
        print(e, file=sys.stderr)
    if not errors:
        print(f"contract manifests match code: {', '.join(sorted(contracts))}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
