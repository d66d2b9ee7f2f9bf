"""Architecture gates for make check (import-linter contract types and drift checks)."""

from unilab_gates.ast_contracts import (
    BackendNameDispatchContract,
    PrivateAttributeContract,
)

__all__ = ["BackendNameDispatchContract", "PrivateAttributeContract"]
