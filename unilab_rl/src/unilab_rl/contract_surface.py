"""The env<->runner Protocols' members as data, for the manifest check.

``unilab_gates.manifests`` checks the public surface and the released hash; it skips dunder
members, so ``EnvFactory.__call__`` (the injected factory's signature) is covered here.
"""

from __future__ import annotations

import inspect

from unilab_rl import contract

PROTOCOLS = {"RunnerEnv": contract.RunnerEnv, "EnvFactory": contract.EnvFactory,
             "OffPolicyAgent": contract.OffPolicyAgent}


def protocol_members(protocol: type) -> dict[str, str]:
    """Member name -> "attribute: <annotation>" or "method<signature>" (``__call__`` included)."""
    members = {name: f"attribute: {annotation}"
               for name, annotation in vars(protocol).get("__annotations__", {}).items()}
    for name, value in vars(protocol).items():
        if callable(value) and (not name.startswith("_") or name == "__call__"):
            members[name] = f"method{inspect.signature(value)}"
    return members


def contract_surface() -> dict[str, dict[str, str]]:
    return {name: protocol_members(protocol) for name, protocol in PROTOCOLS.items()}
