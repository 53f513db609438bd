"""``report --keep``: the sections not run are carried over from an earlier report as they
stand, marked with that run's date; the sections run replace theirs."""

from eosink_benchmarks import kept
from eosink_benchmarks.load import Load
from eosink_benchmarks.report import Report
from eosink_benchmarks.tables import Table, Target


def a_report(tmp_path, kept_from, runs: dict[str, str], date: str) -> str:
    report = Report(str(tmp_path), kept_from)
    for name, figure in runs.items():
        report.running = name
        title = {"throughput": "1. Throughput", "overhead": "2. Exactly-once overhead"}[name]
        table = Table(f"{name} table", ("path", "figure"), (("eosink", figure),))
        report.add(
            title,
            [table],
            [],
            [Target(f"{title.split()[0]} {name}", f"{name} w", "t", figure, True)],
        )
        report.loads.append((name, 1.5, Load(2, 0.5, 1.0, 0.7, 0.0, 0)))
    return report.markdown([f"- date: {date}"], "full")


def test_sections_not_run_are_kept_as_they_stand(tmp_path):
    first = tmp_path / "first.md"
    first.write_text(a_report(tmp_path, None, {"throughput": "1.0x", "overhead": "2 ms"}, "D1"))
    second = a_report(tmp_path, kept.read(str(first)), {"overhead": "3 ms"}, "D2")
    assert "| eosink | 1.0x |" in second and "| eosink | 3 ms |" in second
    assert "2 ms" not in second
    assert second.index("## 1. Throughput") < second.index("## 2. Exactly-once overhead")
    assert "| 1. throughput | throughput w | t | 1.0x | met |" in second
    assert "| 2. overhead | overhead w | t | 3 ms | met |" in second
    assert "| throughput (run of D1) | 1.5 |" in second and "| overhead | 1.5 |" in second
    # kept again: the mark stays that of the run that measured it
    (tmp_path / "second.md").write_text(second)
    third = a_report(tmp_path, kept.read(str(tmp_path / "second.md")), {"overhead": "4 ms"}, "D3")
    assert "| throughput (run of D1) | 1.5 |" in third and "1.0x" in third


def test_a_target_measured_again_replaces_its_kept_row(tmp_path):
    """A target that moved to another section (its text the same) is not shown twice."""
    first = tmp_path / "first.md"
    first.write_text(a_report(tmp_path, None, {"throughput": "1.0x"}, "D1"))
    report = Report(str(tmp_path), kept.read(str(first)))
    report.running = "overhead"
    report.add(
        "2. Exactly-once overhead",
        [],
        [],
        [Target("2. overhead", "throughput w", "t", "2.0x", True)],
    )
    text = report.markdown(["- date: D2"], "full")
    assert "| 2. overhead | throughput w | t | 2.0x | met |" in text
    assert "1.0x | met" not in text
