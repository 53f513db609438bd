"""The benchmark script runs (tiny sizes: a smoke test, not a measurement)."""

import benchmark


def test_benchmark_runs(capsys):
    benchmark.main(["--rows", "400", "--partitions", "2", "--batches", "2"])
    out = capsys.readouterr().out
    assert "plain write_table" in out and "commit stages ms" in out
