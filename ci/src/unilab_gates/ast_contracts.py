"""Two AST rules that import-linter cannot see through imports alone.

PrivateAttributeContract: no code reads another object's ``_private`` attribute (``x._data``,
``getattr(x, "_data")``). ``self``/``cls``/``super()`` are the object's own.

BackendNameDispatchContract: no capability decision on a backend's name: comparing a value
with a backend-name literal, testing membership in a literal collection of backend names,
or a dict literal keyed by backend names. The names come from workspace.toml. Modules that
*are* the registry (create_backend's name -> adapter table) are listed in ``allowed_modules``.

Both register as import-linter contract types in .importlinter.
"""

from __future__ import annotations

import abc
import ast
import importlib.util
import tomllib
from collections.abc import Iterator
from pathlib import Path

from importlinter import Contract, ContractCheck, fields, output

_OWN = {"self", "cls"}


def _module_file(module: str) -> Path | None:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin)


def _modules_in(graph, containers: list[str]) -> Iterator[str]:
    for container in containers:
        yield container
        yield from sorted(graph.find_descendants(container))


def private_attribute_violations(source: str) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            owner = node.value
            own = (isinstance(owner, ast.Name) and owner.id in _OWN) or (
                isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super")
            if not own:
                found.append((node.lineno, f"reads private attribute .{node.attr} of another object"))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "setattr")
              and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
              and isinstance(node.args[1].value, str) and node.args[1].value.startswith("_")
              and not node.args[1].value.startswith("__")
              and not (isinstance(node.args[0], ast.Name) and node.args[0].id in _OWN)):
            found.append((node.lineno, f"{node.func.id}() on private attribute {node.args[1].value!r}"))
    return found


def backend_name_violations(source: str, names: set[str]) -> list[tuple[int, str]]:
    def is_name(node: ast.AST) -> bool:
        return isinstance(node, ast.Constant) and node.value in names

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(is_name(o) for o in operands):
                found.append((node.lineno, "compares a value with a backend-name literal"))
            elif any(isinstance(o, (ast.Tuple, ast.List, ast.Set)) and any(is_name(e) for e in o.elts)
                     for o in operands):
                found.append((node.lineno, "tests membership in a literal set of backend names"))
        elif isinstance(node, ast.Dict) and any(k is not None and is_name(k) for k in node.keys):
            found.append((node.lineno, "dict literal keyed by backend names (name dispatch)"))
        elif isinstance(node, ast.MatchValue) and is_name(node.value):
            found.append((node.lineno, "match/case on a backend-name literal"))
    return found


class _AstContract(Contract):
    containers = fields.ListField(subfield=fields.StringField())
    allowed_modules = fields.ListField(subfield=fields.StringField(), required=False, default=[])

    @abc.abstractmethod
    def violations(self, source: str) -> list[tuple[int, str]]: ...

    def check(self, graph, verbose: bool) -> ContractCheck:
        broken = []
        for module in _modules_in(graph, self.containers):
            if module in self.allowed_modules:
                continue
            path = _module_file(module)
            if path is None:
                continue
            for line, why in self.violations(path.read_text()):
                broken.append({"module": module, "line": line, "why": why})
        return ContractCheck(kept=not broken, metadata={"broken": broken})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for item in check.metadata["broken"]:
            output.print_error(f"{item['module']}:{item['line']}: {item['why']}")


class PrivateAttributeContract(_AstContract):
    def violations(self, source: str) -> list[tuple[int, str]]:
        return private_attribute_violations(source)


def _workspace_backend_names(start: Path) -> set[str]:
    for parent in [start, *start.parents]:
        candidate = parent / "workspace.toml"
        if candidate.is_file():
            backends = tomllib.loads(candidate.read_text())["backends"]
            return set(backends["active"]) | set(backends["shelved"])
    raise FileNotFoundError("workspace.toml not found; the backend-name gate reads its names there")


class BackendNameDispatchContract(_AstContract):
    workspace = fields.StringField(required=False, default=".")

    def violations(self, source: str) -> list[tuple[int, str]]:
        return backend_name_violations(source, _workspace_backend_names(Path(self.workspace).resolve()))
