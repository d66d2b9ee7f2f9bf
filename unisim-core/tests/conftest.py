import pytest
from unisim.conformance import BUILTIN_MODEL


@pytest.fixture(scope="session")
def builtin_model() -> str:
    return str(BUILTIN_MODEL)
