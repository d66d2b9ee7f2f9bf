"""Policy export: the deterministic actor as an ONNX or TorchScript file plus its metadata.

The exported graph maps raw "policy" observations ``(batch, obs_dim)`` float32 to actions
``(batch, action_dim)``: observation normalization, the actor and the tanh squashing are
all inside it, so a deployment stack feeds what the env's observation group computes and
turns the output into joint targets with the metadata's ``action_offset + action_scale *
clip(action)``. The batch axis is dynamic.

The metadata (a JSON-able dict, see ``unilab_rl.cli.export`` for what the CLI puts in it)
travels three ways: ONNX ``metadata_props`` (one entry per top-level key, values JSON
encoded), a TorchScript extra file ``metadata.json``, and a JSON file next to the policy
(``policy.onnx`` -> ``policy.json``) for stacks that read neither.

``staging_path`` names a temporary file beside a target: a caller writes and checks the export
there and moves it into place only once it passed, so a failed export never replaces a good one.

ONNX uses torch's TorchScript based exporter (``dynamo=False``): it needs only onnx, it
exports in a fraction of a second, and its output matched torch to float rounding for both
actors (tests/test_export.py). torch marks it deprecated in favour of the ``torch.export``
based exporter (``dynamo=True``, which also needs onnxscript); switch when it goes away.
The exporter restores the top module's train flag afterwards with ``train()``, which sets
every child's flag too (an eval-mode actor inside a train-mode wrapper came back in training
mode, its BatchNorm then on batch statistics): the module exported here is always a frozen
copy in eval mode (``SquashedMeanPolicy``).

onnx and onnxruntime are an optional dependency (``unilab-rl[export]``).
"""

from __future__ import annotations

import contextlib
import json
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn

__all__ = ["EXPORT_FORMATS", "INPUT_NAME", "METADATA_FILE", "OUTPUT_NAME", "ExportError", "check_export_packages",
           "export_policy",
           "load_exported", "metadata_path", "read_metadata", "run_exported", "staging_path"]

EXPORT_FORMATS = ("onnx", "torchscript")
SUFFIXES = {"onnx": ".onnx", "torchscript": ".pt"}
INPUT_NAME = "obs"
OUTPUT_NAME = "actions"
METADATA_FILE = "metadata.json"  # the TorchScript extra file
ONNX_OPSET = 18
EXTRA_HINT = "install the export extra: pip install 'unilab-rl[export]' (onnx, onnxruntime)"


@contextlib.contextmanager
def _without_deprecation_notices() -> Iterator[None]:
    """torch 2.13 marks torch.jit and the TorchScript based ONNX exporter deprecated; both
    still work, and TorchScript is what a libtorch deployment loads today."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        yield


class ExportError(RuntimeError):
    """Export failed or a needed package is missing; the message says which."""


def check_export_packages(fmt: str) -> None:
    """Raise ExportError naming what to install when ``fmt`` cannot be written here."""
    if fmt not in EXPORT_FORMATS:
        raise ExportError(f"unknown export format {fmt!r}; valid: {', '.join(EXPORT_FORMATS)}")
    if fmt == "onnx":
        try:
            import onnx  # noqa: F401
        except ImportError as error:
            raise ExportError(f"ONNX export needs onnx ({error}); {EXTRA_HINT}") from None


def metadata_path(policy_path: Path) -> Path:
    """The JSON metadata file written next to an exported policy."""
    return Path(policy_path).with_suffix(".json")


def staging_path(target: Path) -> Path:
    """A new empty file beside ``target`` to write it in before moving it into place: the same
    folder, so the move is an atomic rename on one filesystem; the same suffix, as
    ``load_exported`` picks the runtime by it. Created exclusively with the umask's mode (not
    mkstemp's 0600), so the file moved into place has the permissions a direct write gives."""
    target = Path(target)
    staged = target.with_name(f".{target.stem}.{uuid.uuid4().hex[:12]}.tmp{target.suffix}")
    staged.touch(exist_ok=False)
    return staged


def export_policy(policy: nn.Module, obs_dim: int, path: Path, fmt: str, metadata: dict[str, Any],
                  sidecar: Path | None = None) -> Path:
    """Write ``policy`` (a module from (B, obs_dim) observations to (B, action_dim) actions,
    on the CPU) to ``path`` in format ``fmt``, with ``metadata``; returns the metadata file,
    ``sidecar`` or by default ``metadata_path(path)``."""
    check_export_packages(fmt)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    policy = policy.cpu().eval()
    example = torch.zeros(2, obs_dim)
    text = json.dumps(metadata, indent=1, sort_keys=True)
    if fmt == "onnx":
        _export_onnx(policy, example, path, metadata)
    else:
        with torch.no_grad(), _without_deprecation_notices():
            traced = torch.jit.trace(policy, example, check_trace=False)
            torch.jit.save(traced, str(path), _extra_files={METADATA_FILE: text})
    sidecar = metadata_path(path) if sidecar is None else Path(sidecar)
    sidecar.write_text(text + "\n")
    return sidecar


def _export_onnx(policy: nn.Module, example: torch.Tensor, path: Path, metadata: dict[str, Any]) -> None:
    import onnx  # present: export_policy checked it

    with _without_deprecation_notices():
        torch.onnx.export(policy, (example,), str(path), dynamo=False, input_names=[INPUT_NAME],
                          output_names=[OUTPUT_NAME], opset_version=ONNX_OPSET,
                          dynamic_axes={INPUT_NAME: {0: "batch"}, OUTPUT_NAME: {0: "batch"}})
    model = onnx.load(str(path))
    for key, value in metadata.items():
        entry = model.metadata_props.add()
        entry.key = key
        entry.value = json.dumps(value, sort_keys=True)
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def read_metadata(path: Path) -> dict[str, Any]:
    """The metadata embedded in an exported policy file (ONNX or TorchScript)."""
    path = Path(path)
    if path.suffix == SUFFIXES["onnx"]:
        import onnx

        try:
            model = onnx.load(str(path), load_external_data=False)
        except Exception as error:  # noqa: BLE001 - a damaged file fails in protobuf's parser (DecodeError) or anywhere
            raise ValueError(f"not a readable ONNX file ({type(error).__name__}: {error})") from None
        return {entry.key: json.loads(entry.value) for entry in model.metadata_props}
    extra = {METADATA_FILE: ""}
    with _without_deprecation_notices():
        torch.jit.load(str(path), map_location="cpu", _extra_files=extra)
    return json.loads(extra[METADATA_FILE])


def load_exported(path: Path) -> Any:
    """A callable ``(B, obs_dim) float32 tensor -> (B, action_dim) tensor`` running the
    exported file: onnxruntime for ``.onnx``, torch.jit for ``.pt``."""
    path = Path(path)
    if path.suffix != SUFFIXES["onnx"]:
        with _without_deprecation_notices():
            module = torch.jit.load(str(path), map_location="cpu")
        return lambda obs: module(obs.cpu())
    try:
        import onnxruntime
    except ImportError as error:
        raise ExportError(f"running an ONNX policy needs onnxruntime ({error}); {EXTRA_HINT}") from None
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1  # a policy step is tiny; threads only add jitter
    session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    # The ONNX Runtime API takes and returns NumPy arrays; torch converts at the boundary.
    return lambda obs: torch.from_numpy(session.run([OUTPUT_NAME], {INPUT_NAME: obs.detach().cpu().numpy()})[0])


@torch.no_grad()
def run_exported(path: Path, observations: torch.Tensor) -> torch.Tensor:
    """Actions of the exported policy at ``path`` for ``observations`` (B, obs_dim)."""
    return load_exported(path)(observations.float())
