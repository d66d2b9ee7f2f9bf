"""What construction-time requests share (contact sensors, height scans): a list of specs with
distinct names, checked before any model is read."""

from __future__ import annotations

from unisim.errors import ContractViolation


def named_specs(value: object, spec_type: type, argument: str, noun: str) -> tuple:
    """``value`` as a tuple of ``spec_type`` (None: none), refusing anything else and repeated
    ``name``s with a ContractViolation naming ``argument``."""
    if value is None:
        return ()
    if isinstance(value, (str, spec_type)) or not isinstance(value, (list, tuple)):
        raise ContractViolation(f"{argument}: expected a list of {spec_type.__name__}, got {type(value).__name__}")
    for i, spec in enumerate(value):
        if not isinstance(spec, spec_type):
            raise ContractViolation(f"{argument}[{i}]: expected a {spec_type.__name__}, got {type(spec).__name__}")
    names = [s.name for s in value]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ContractViolation(f"{argument}: {noun} names repeat: {repeated}")
    return tuple(value)
