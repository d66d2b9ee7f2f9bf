"""unilab-motion writes its outputs (check --json, import --out, export-csv OUT) through a temporary
file and a rename, which replaces whatever the path names: a FIFO or a device node would become a
regular file, a link would be replaced. Such a path is refused before any work (exit 2)."""

from __future__ import annotations

import os
import stat

import pytest
from fk_clip import synthetic_clip
from unilab.assets.motion import save_clip
from unilab.assets.motion.cli import main as motion_cli


@pytest.fixture
def clip(tmp_path):
    return save_clip(synthetic_clip(frames=30, fps=30.0, name="sway"), tmp_path / "sway.npz")


@pytest.mark.parametrize("kind", ["fifo", "link", "dangling link"])
def test_an_output_that_is_not_a_regular_file_or_new_is_refused_before_any_work(tmp_path, clip, capsys, kind):
    target = tmp_path / "target.json"
    path = tmp_path / "report.json"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        if kind == "link":
            target.write_text("precious\n")
        path.symlink_to(target)
    for argv in (["check", str(clip), "--json", str(path)], ["export-csv", str(clip), str(path)]):
        capsys.readouterr()
        assert motion_cli(argv) == 2, argv
        captured = capsys.readouterr()
        assert "is not a regular file" in captured.err and str(path) in captured.err, captured.err
        assert "sway" not in captured.out  # refused before the clip was checked
    assert stat.S_ISFIFO(os.lstat(path).st_mode) if kind == "fifo" else path.is_symlink()
    assert (target.read_text() == "precious\n") if kind == "link" else not target.exists()
