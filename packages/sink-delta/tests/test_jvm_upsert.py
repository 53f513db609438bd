"""Delta's own Spark connector (delta-spark 4.4 on Spark 4.2, in a process of its own: see
:mod:`eosink.testing.reference_spark`) and keyed upserts: it reads the MERGE commits eosink
writes, whole and filtered by the key, as the other readers do; and a real deletion vector it
leaves (a DELETE on a table with deletion vectors on) makes an upsert that would rewrite that
file refuse it by name, while an upsert of other keys still commits and reads back right."""

from __future__ import annotations


import pytest
from delta_helpers import DELTA_SESSION, DELTA_SPARK_VERSION, log_version, run
from test_upsert import READERS, upsert_sink, users, values

from eosink.plugin import ConfigurationError
from eosink.testing.reference_spark import Read, Sql, run_reference


def by_key(rows):
    assert len({r["user_id"] for r in rows}) == len(rows), rows
    return {r["user_id"]: r["v"] for r in rows}


def test_delta_spark_reads_the_upserts(tmp_path):
    plain, parted = str(tmp_path / "plain"), str(tmp_path / "parted")
    for path, options, part in (
        (plain, {}, lambda ids: None),
        (parted, {"partition_by": ["p"]}, lambda ids: ["a" if i % 2 else "b" for i in ids]),
    ):
        sink = upsert_sink(path, **options)
        run(sink, 0, [users([1, 2, 3], "b0", part([1, 2, 3])), users([4, 5], "b0", part([4, 5]))])
        run(sink, 1, [users([4, 6], "b1", part([5, 6])), users([1], "b1", part([1]))])
        run(sink, 2, [users([6, 7, 2], "b2", part([7, 7, 2]))])
    expected = {1: "b1-1", 2: "b2-2", 3: "b0-3", 4: "b1-4", 5: "b0-5", 6: "b2-6", 7: "b2-7"}
    steps = [
        Read("delta", plain),
        Read("delta", plain, where="user_id = 4"),
        Read("delta", parted),
        Read("delta", parted, where="user_id = 6"),
        Read("delta", parted, where="p = 'a'"),
    ]
    results = run_reference(DELTA_SPARK_VERSION, ["delta"], steps, conf=DELTA_SESSION)
    whole, four, parted_whole, six, in_a = [r.ok() for r in results]
    assert by_key(whole) == expected
    assert by_key(four) == {4: "b1-4"}
    assert by_key(parted_whole) == expected
    assert by_key(six) == {6: "b2-6"}
    assert {r["user_id"]: r["p"] for r in parted_whole} == {
        1: "a",
        2: "b",
        3: "a",
        4: "a",  # moved by batch 1 from partition b (key without the partition column)
        5: "a",
        6: "a",  # moved by batch 2 from partition b
        7: "a",
    }
    assert by_key(in_a) == {k: v for k, v in expected.items() if k != 2}
    for reader in READERS.values():
        assert values(parted, reader) == expected


def test_a_real_deletion_vector_is_refused_by_name(tmp_path):
    path = str(tmp_path / "t")
    sink = upsert_sink(path)
    run(sink, 0, [users([1, 2, 3], "b0")])
    run(sink, 1, [users([10, 11], "b1")])
    table = f"delta.`{path}`"
    done = run_reference(
        DELTA_SPARK_VERSION,
        ["delta"],
        [
            Sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"),
            Sql(f"DELETE FROM {table} WHERE user_id = 1"),
            Read("delta", path),
        ],
        conf=DELTA_SESSION,
    )
    assert by_key(done[2].ok()) == {2: "b0-2", 3: "b0-3", 10: "b1-10", 11: "b1-11"}
    version = log_version(path)
    with pytest.raises(ConfigurationError, match=r"have deletion vectors \(part-"):
        run(upsert_sink(path), 2, [users([2], "b2")])
    assert log_version(path) == version
    # keys the file with the vector cannot hold: it is neither read nor rewritten
    assert run(upsert_sink(path), 2, [users([11, 12], "b2")]).status == "committed"
    (read,) = run_reference(
        DELTA_SPARK_VERSION, ["delta"], [Read("delta", path)], conf=DELTA_SESSION
    )
    assert by_key(read.ok()) == {2: "b0-2", 3: "b0-3", 10: "b1-10", 11: "b2-11", 12: "b2-12"}
