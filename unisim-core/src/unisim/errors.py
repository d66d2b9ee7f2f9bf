"""The one error type of the SimBackend contract."""


class ContractViolation(ValueError):
    """A caller or an adapter broke the SimBackend contract.

    The message names the argument (or declaration field) and what was expected. Raised
    before any state changes, so the backend is left as it was.
    """
