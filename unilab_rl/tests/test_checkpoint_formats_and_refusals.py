"""Checkpoint loading and saving: which format versions and which incomplete or unsafe files are
refused, the non-finite checks on plain values, and the RNG round trip. Each test names the small
change to ``checkpoint.py`` it fails on. Documents are written with ``torch.save`` directly (with
digests from ``state_digests``) so that only the property under test is wrong in them."""

from __future__ import annotations

import math
import random

import pytest
import torch
from unilab_rl.checkpoint import (
    CHECKPOINT_FORMAT,
    INTEGRITY_KEY,
    CheckpointError,
    NonFiniteState,
    capture_rng_state,
    load_checkpoint,
    restore_rng_state,
    save_checkpoint,
    state_digests,
)
from unilab_rl.contract import ENV_RUNNER_CONTRACT_VERSION


def _payload() -> dict:
    return {"task": "t", "backend": "mujoco", "env_overrides": {}, "algo": "fastsac", "algo_config": {},
            "spec": {}, "agent": {"w": torch.arange(4, dtype=torch.float32)}, "counters": {"env_steps": 3},
            "rng": {}, "env": {}}


def _write(path, version=3, drop=(), digests=True, **extra):
    """A document as ``save_checkpoint`` would write it, at ``version``, less the keys in ``drop``."""
    document = {"format": CHECKPOINT_FORMAT, "format_version": version,
                "contract_version": ENV_RUNNER_CONTRACT_VERSION, **_payload(), **extra}
    for key in drop:
        del document[key]
    if digests:
        document[INTEGRITY_KEY] = {"algorithm": "sha256", "digests": state_digests(document)[0]}
    torch.save(document, path)
    return path


# ---- format versions ----------------------------------------------------------------------------

def test_a_checkpoint_from_a_newer_format_is_refused_naming_the_versions_read(tmp_path):
    # (mutant: version 4 added to the versions read)
    path = _write(tmp_path / "v4.pt", version=4)
    with pytest.raises(CheckpointError, match=r"has format version 4, this unilab_rl reads \[1, 2, 3\]"):
        load_checkpoint(path)


@pytest.mark.parametrize("version", [0, "3", None])
def test_a_format_version_that_is_not_one_of_the_known_numbers_is_refused(tmp_path, version):
    path = _write(tmp_path / "odd.pt", version=version)
    with pytest.raises(CheckpointError, match="has format version"):
        load_checkpoint(path)


def test_a_format_1_checkpoint_without_digests_is_still_read(tmp_path):
    # (mutant: the digest check applied to version 1, which has none)
    path = _write(tmp_path / "v1.pt", version=1, drop=("env",), digests=False)
    document = load_checkpoint(path)
    assert document["format_version"] == 1 and torch.equal(document["agent"]["w"], torch.arange(4.0))


def test_a_format_1_checkpoint_holding_nan_is_refused(tmp_path):
    path = _write(tmp_path / "v1_nan.pt", version=1, drop=("env",), digests=False,
                  agent={"w": torch.tensor([1.0, math.nan])})
    with pytest.raises(CheckpointError, match=r"v1_nan.pt is damaged: agent\.w hold NaN or inf"):
        load_checkpoint(path)


# ---- completeness ---------------------------------------------------------------------------------

# What a resume reads (the module docstring): the run's identity, the learner, counters and RNGs.
@pytest.mark.parametrize("key", ["task", "backend", "env_overrides", "algo", "algo_config", "spec", "agent",
                                 "counters", "rng"])
def test_a_checkpoint_missing_a_required_part_is_refused_naming_it(tmp_path, key):
    # (mutants: a key dropped from REQUIRED_KEYS). The digests match: the file is intact, only
    # incomplete, so the refusal must come from the completeness check.
    path = _write(tmp_path / "part.pt", drop=(key,))
    with pytest.raises(CheckpointError, match=rf"part.pt is incomplete: missing \['{key}'\]"):
        load_checkpoint(path)


def test_a_format_3_checkpoint_without_the_envs_state_is_refused(tmp_path):
    # (mutant: ``format_version >= 3`` -> ``> 3`` for the env state)
    path = _write(tmp_path / "v3.pt", drop=("env",))
    with pytest.raises(CheckpointError, match=r"v3.pt is incomplete: missing \['env'\]"):
        load_checkpoint(path)


def test_a_format_2_checkpoint_needs_no_env_state(tmp_path):
    path = _write(tmp_path / "v2.pt", version=2, drop=("env",))
    assert "env" not in load_checkpoint(path)


@pytest.mark.parametrize("record", [None, {"algorithm": "sha256"}, {"algorithm": "sha256", "digests": ["x"]}, "x"])
def test_a_missing_or_unreadable_integrity_record_is_refused_by_name(tmp_path, record):
    # (mutant: only the record's own type checked: a record without a digests dict raised KeyError)
    path = _write(tmp_path / "c.pt", digests=False)
    document = torch.load(path, weights_only=True)
    if record is not None:
        document[INTEGRITY_KEY] = record
    torch.save(document, path)
    with pytest.raises(CheckpointError, match="its integrity record is missing or unreadable"):
        load_checkpoint(path)


def test_a_directory_given_as_the_checkpoint_is_refused_as_not_a_file(tmp_path):
    # (mutant: ``is_file()`` -> ``exists()``)
    with pytest.raises(CheckpointError, match="does not exist or is not a file"):
        load_checkpoint(tmp_path)


# ---- loading never runs code ------------------------------------------------------------------

RAN: list[str] = []


def _record_call(text: str) -> str:
    RAN.append(text)
    return text


class _RunsOnLoad:
    """Unpickles by calling ``_record_call``, into the plain string the digests were taken over."""

    def __reduce__(self):
        return (_record_call, ("t",))


def test_a_checkpoint_that_would_run_code_when_loaded_is_refused_without_running_it(tmp_path):
    # (mutant: ``weights_only=True`` -> ``False``)
    path = _write(tmp_path / "c.pt")  # digests over task == "t"
    document = torch.load(path, weights_only=True)
    document["task"] = _RunsOnLoad()
    torch.save(document, path)
    RAN.clear()
    with pytest.raises(CheckpointError, match="corrupt or not a unilab_rl checkpoint"):
        load_checkpoint(path)
    assert RAN == []


# ---- non-finite plain values --------------------------------------------------------------------

@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_non_finite_plain_float_is_never_written_and_is_named(tmp_path, value):
    # (mutant: the check of plain floats dropped: only tensors were checked)
    path = tmp_path / "c.pt"
    with pytest.raises(NonFiniteState, match=r"counters\.reward_sum hold NaN or inf") as raised:
        save_checkpoint(path, {**_payload(), "counters": {"env_steps": 3, "reward_sum": value}})
    assert raised.value.parts == ["counters.reward_sum"]
    assert not path.exists()


def test_a_complex_tensor_holding_nan_is_never_written(tmp_path):
    # (mutant: only real floating-point tensors checked)
    path = tmp_path / "c.pt"
    state = {"w": torch.tensor([1 + 1j, complex(math.nan, 0.0)])}
    with pytest.raises(NonFiniteState) as raised:
        save_checkpoint(path, {**_payload(), "agent": state})
    assert raised.value.parts == ["agent.w"] and not path.exists()


# ---- the RNG round trip -----------------------------------------------------------------------

def test_restoring_a_captured_rng_state_replays_the_same_draws():
    # (mutants: the torch or the Python generator left unrestored)
    state = capture_rng_state()
    expected = (torch.rand(4), [random.random() for _ in range(4)])
    torch.rand(100), [random.random() for _ in range(7)]  # move both generators on
    restore_rng_state(state)
    assert torch.equal(torch.rand(4), expected[0]) and [random.random() for _ in range(4)] == expected[1]


def test_a_python_rng_state_written_as_lists_is_restored(tmp_path):
    # (mutant: the internal state passed on as a list, which random.setstate refuses)
    state = capture_rng_state()
    expected = [random.random() for _ in range(4)]
    version, internal, gauss = state["python"]
    restore_rng_state({**state, "python": [version, list(internal), gauss]})  # as a JSON-ish writer keeps it
    assert [random.random() for _ in range(4)] == expected
