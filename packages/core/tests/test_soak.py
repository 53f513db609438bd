"""The soak command (:mod:`eosink.testing.soak`) soaks several sinks' simulations in one call."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from eosink.testing import soak

SIMULATION = """
import json, os

def test_generated_histories():
    with open(os.environ["EOSINK_SIMULATION_STATS"], "a") as f:
        f.write(json.dumps({{"kit": "{kit}", "steps": 1}}) + "\\n")
    assert {ok}
"""


def _sink_tests(root: Path, kit: str, ok: bool = True) -> Path:
    """A sink's tests folder holding its ``test_simulation.py`` (no ``__init__.py``, as in
    every package of this repository)."""
    folder = root / kit / "tests"
    folder.mkdir(parents=True)
    (folder / "test_simulation.py").write_text(SIMULATION.format(kit=kit, ok=ok))
    return folder / "test_simulation.py"


@pytest.fixture
def child_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The soak's pytest processes import what this one does."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in sys.path if p))


@pytest.mark.usefixtures("child_path")
def test_two_sinks_simulations_soak_in_one_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = _sink_tests(tmp_path, "files")
    delta = _sink_tests(tmp_path, "delta")
    stats = tmp_path / "stats.jsonl"
    argv = ["--rounds", "2", "--seed", "7", "--stats", str(stats), str(files), str(delta)]
    assert soak.main(argv) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert "import file mismatch" not in out
    assert "2 round(s), 0 failed" in out
    kits = [json.loads(line)["kit"] for line in stats.read_text().splitlines()]
    assert sorted(kits) == ["delta", "delta", "files", "files"]


@pytest.mark.usefixtures("child_path")
def test_a_failing_sink_is_named_and_the_others_still_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = _sink_tests(tmp_path, "files", ok=False)
    delta = _sink_tests(tmp_path, "delta")
    stats = tmp_path / "stats.jsonl"
    argv = ["--rounds", "1", "--seed", "7", "--stats", str(stats), str(files), str(delta)]
    assert soak.main(argv) == 1
    out = capsys.readouterr().out
    assert f"1 round(s), 1 failed: 7 ({files})" in out
    assert f"seed 7: {delta}: passed" in out
