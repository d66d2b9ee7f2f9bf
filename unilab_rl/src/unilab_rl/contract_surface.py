"""The env<->runner contract's surface as data, for the manifest drift check.

The surface is every public member of each Protocol in ``unilab_rl.contract``: attributes
with their annotation, methods with their signature. Its SHA-256 is recorded per version in
contracts/env_runner/v1.toml, so changing a member without adding a new version fails.
"""

from __future__ import annotations

import hashlib
import inspect
import json

from unilab_rl import contract

PROTOCOLS = {"RunnerEnv": contract.RunnerEnv, "EnvFactory": contract.EnvFactory,
             "OffPolicyAgent": contract.OffPolicyAgent}


def protocol_members(protocol: type) -> dict[str, str]:
    """Member name -> "attribute: <annotation>" or "method<signature>"."""
    members = {name: f"attribute: {annotation}"
               for name, annotation in vars(protocol).get("__annotations__", {}).items()}
    for name, value in vars(protocol).items():
        if callable(value) and (not name.startswith("_") or name == "__call__"):
            members[name] = f"method{inspect.signature(value)}"
    return members


def contract_surface() -> dict[str, dict[str, str]]:
    return {name: protocol_members(protocol) for name, protocol in PROTOCOLS.items()}


def surface_digest() -> str:
    canonical = json.dumps(contract_surface(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()
