"""The root README's benchmark figures are those of the committed report.

``docs/benchmarks/report.md`` is the report of one full run; the README's block of figures is
generated from it (``./pants run benchmarks:readme -- docs/benchmarks/report.md README.md``).
A new run committed without regenerating the README, or a hand edit of the block, fails here.
"""

from pathlib import Path

import pytest

from eosink_benchmarks import readme

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "docs" / "benchmarks" / "report.md"


def test_the_readme_figures_are_the_committed_reports():
    current = (ROOT / "README.md").read_text()
    assert readme.regenerate(str(REPORT), str(ROOT / "README.md")) == current, (
        "README.md's benchmark figures differ from docs/benchmarks/report.md; run "
        "./pants run benchmarks:readme -- docs/benchmarks/report.md README.md"
    )


def test_every_plot_the_report_shows_is_committed():
    for png in readme.figures(REPORT.read_text(), str(REPORT), str(ROOT)).split("(docs/")[1:]:
        assert (ROOT / "docs" / png.split(")")[0]).is_file(), png


def test_only_a_full_report_makes_figures(tmp_path):
    smoke = tmp_path / "report.md"
    smoke.write_text("# eosink benchmark report (smoke)\n\n- date: x\n")
    with pytest.raises(ValueError, match="not a full report"):
        readme.figures(smoke.read_text(), str(smoke), str(tmp_path))
