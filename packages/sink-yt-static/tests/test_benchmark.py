"""The benchmark script runs (tiny sizes: a smoke test, not a measurement)."""

from eosink_yt_static_benchmarks import writes


def test_benchmark_runs(capsys):
    writes.main(
        [
            "--rows",
            "400",
            "--partitions",
            "2",
            "--batches",
            "2",
            "--append-rows",
            "100",
            "--sizes",
            "100,1000",
            "--merge-sizes",
            "100",
            "--spill-rows",
            "400",
            "--spill-request-rows",
            "100",
            "--repeats",
            "1",
        ]
    )
    out = capsys.readouterr().out
    assert "plain write_table" in out and "against the table's size" in out
    assert "merge-append" in out and "sorted-append" in out and "spilled MB" in out
