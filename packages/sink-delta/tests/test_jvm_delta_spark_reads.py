"""Delta's own Spark connector (delta-spark 4.4 on Spark 4.2, the reference reader most users
read with) reads every kind of table eosink-delta writes, whole and with a filter on each
column, and returns what the table holds.

The connector runs on the Spark it is built for, in a process of its own
(:mod:`eosink.testing.reference_spark`). Every table is read whole, then with each predicate
of each column (equal to a value it holds, ``IS NULL``, between two values it holds): the
filtered read must return exactly the rows of the whole read that the predicate passes,
whatever file statistics and partition values the connector skips files by. The tables:
partitioned by odd values with checkpoints (:mod:`test_readers`' table), every column type
with the values where statistics go wrong (long strings, NaN and the infinities, decimals of
scale 10, the first and last dates), complete mode, the partitioned table after delta-rs'
optimize, checkpoint and vacuum, and a table Delta's connector maintains (``OPTIMIZE``, an
append, ``VACUUM``) while a batch of eosink's is between its write and its commit.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import shutil
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from delta_helpers import DELTA_SESSION, DELTA_SPARK_VERSION, run
from eosink_delta.sink import DeltaSink
from test_readers import BATCHES, batch_rows, expected

from eosink.plugin import SinkError
from eosink.testing.faults import BeforeCommit
from eosink.testing.reference_spark import Read, Sql, run_reference

UTC = dt.timezone.utc
LONG = "x" * 5000


def wide_batch(batch: int) -> pa.RecordBatch:
    """Six rows of every type, the values where statistics go wrong among them."""
    n = 6
    ids = [batch * 10 + i for i in range(n)]
    pick = lambda values: [values[(i + batch) % len(values)] for i in range(n)]  # noqa: E731
    return pa.record_batch(
        {
            "id": pa.array(ids, pa.int64()),
            "i8": pa.array(pick([-128, 127, 0, None, 5]), pa.int8()),
            "i32": pa.array(pick([-(2**31), 2**31 - 1, 7, None]), pa.int32()),
            "f32": pa.array(pick([1.5, float("nan"), None, -2.25, float("inf")]), pa.float32()),
            "f64": pa.array(pick([0.1, float("-inf"), None, 1e300, float("nan")]), pa.float64()),
            "b": pa.array(pick([True, False, None]), pa.bool_()),
            "s": pa.array(pick(["a" * 40, LONG, "", None, "Zürich", "\u2028line"]), pa.string()),
            "d": pa.array(
                pick([decimal.Decimal("0E-10"), decimal.Decimal("1.0000000001"), None]),
                pa.decimal128(20, 10),
            ),
            "day": pa.array(pick([dt.date(1, 1, 1), dt.date(9999, 12, 31), None]), pa.date32()),
            "at": pa.array(
                pick([dt.datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC), None]),
                pa.timestamp("us", tz="UTC"),
            ),
            "st": pa.array(pick([{"k": 1, "v": "a"}, None, {"k": None, "v": "b"}])),
        }
    )


def literal(value: Any, spark_type: str) -> str:
    """A Spark SQL literal of a value the connector handed back (plain JSON)."""
    if spark_type == "string":
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if spark_type in ("float", "double", "decimal(20,10)", "date", "timestamp"):
        return f"CAST('{value}' AS {spark_type})"
    return str(value).lower() if isinstance(value, bool) else str(value)


def ordered(value: Any, spark_type: str) -> Any:
    """The value as Spark orders it (NaN above everything, as Spark does)."""
    if spark_type in ("float", "double"):
        number = float(value)
        return (1, 0.0) if math.isnan(number) else (0, number)
    if spark_type.startswith("decimal"):
        return decimal.Decimal(value)
    if spark_type == "timestamp":
        return dt.datetime.fromisoformat(value)
    if spark_type == "date":
        return dt.date.fromisoformat(value)
    return value


def predicates(rows: list[dict[str, Any]], types: dict[str, str]) -> list[tuple[str, Any]]:
    """(SQL predicate, the rows' ids it passes) for each column: equal to a held value, IS
    NULL, between two held values; and for a float column holding NaN, ``= NaN`` and ``>`` its
    greatest number (:data:`NAN_PREDICATES`)."""
    out = []
    for column, spark_type in types.items():
        held = sorted(
            {r[column] for r in rows if r[column] is not None},
            key=lambda v: ordered(v, spark_type),
        )
        out.append((f"`{column}` IS NULL", {r["id"] for r in rows if r[column] is None}))
        if not held:
            continue
        value = held[len(held) // 2]
        out.append(
            (
                f"`{column}` = {literal(value, spark_type)}",
                {r["id"] for r in rows if r[column] == value},
            )
        )
        if spark_type in ("float", "double") and "NaN" in held:
            # Spark orders NaN above every number, and NaN = NaN holds: a reader skipping files
            # by bounds that leave NaN out loses these rows
            finite = [v for v in held if isinstance(v, (int, float))]
            out.append(
                (
                    f"`{column}` = CAST('NaN' AS {spark_type})",
                    {r["id"] for r in rows if r[column] == "NaN"},
                )
            )
            NAN_PREDICATES.add(out[-1][0])
            if finite:
                top = max(finite)
                above = {r["id"] for r in rows if r[column] == "NaN" or r[column] == "Infinity"}
                out.append(
                    (
                        f"`{column}` > {literal(top, spark_type)}",
                        above
                        | {
                            r["id"]
                            for r in rows
                            if isinstance(r[column], (int, float)) and r[column] > top
                        },
                    )
                )
                NAN_PREDICATES.add(out[-1][0])
        if spark_type != "boolean" and len(held) > 2:
            low, high = ordered(held[1], spark_type), ordered(held[-2], spark_type)
            passes = {
                r["id"]
                for r in rows
                if r[column] is not None and low <= ordered(r[column], spark_type) <= high
            }
            sql = (
                f"`{column}` BETWEEN {literal(held[1], spark_type)} "
                f"AND {literal(held[-2], spark_type)}"
            )
            out.append((sql, passes))
    return out


#: The predicates whose answer depends on NaN (Spark orders NaN above every number).
NAN_PREDICATES: set[str] = set()

#: The columns filtered on, by table, with their Spark types.
PARTITIONED = {"id": "bigint", "x": "double", "at": "timestamp", "s": "string", "p": "string"}
WIDE = {
    "id": "bigint",
    "i8": "tinyint",
    "i32": "int",
    "f32": "float",
    "f64": "double",
    "b": "boolean",
    "s": "string",
    "d": "decimal(20,10)",
    "day": "date",
    "at": "timestamp",
}


@pytest.fixture(scope="module")
def tables(tmp_path_factory) -> dict[str, tuple[str, dict[str, str]]]:
    root = tmp_path_factory.mktemp("delta-spark-reads")
    partitioned = str(root / "partitioned")
    sink = DeltaSink(path=partitioned, partition_by=("p",))
    assert run(sink, 0, [batch_rows(0)]).status == "committed"
    DeltaTable(partitioned).alter.set_table_properties({"delta.checkpointInterval": "3"})
    for batch in range(1, BATCHES):
        assert run(sink, batch, [batch_rows(batch)]).status == "committed"

    wide = str(root / "wide")
    for batch in range(3):
        parts = [wide_batch(batch).slice(0, 3), wide_batch(batch).slice(3)]
        assert run(DeltaSink(path=wide), batch, parts).status == "committed"

    complete = str(root / "complete")
    for batch in range(3):
        outcome = run(DeltaSink(path=complete), batch, [wide_batch(batch)], mode="complete")
        assert outcome.status == "committed"

    maintained = str(root / "maintained")
    shutil.copytree(partitioned, maintained)
    table = DeltaTable(maintained)
    table.optimize.compact()
    table.create_checkpoint()
    table.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    return {
        "partitioned": (partitioned, PARTITIONED),
        "wide": (wide, WIDE),
        "complete": (complete, WIDE),
        "maintained": (maintained, PARTITIONED),
        "maintained-by-spark": (maintained_by_delta_spark(str(root / "by-spark")), WIDE),
    }


#: The rows Delta's own writer appends to the table maintained by Delta's connector: batch 0's
#: rows under other ids.
FOREIGN_OFFSET = 900


def maintained_by_delta_spark(path: str) -> str:
    """A table Delta's connector maintains while a batch of eosink's is between its write and
    its commit: ``OPTIMIZE``, an append by Delta's own writer, and ``VACUUM ... RETAIN 0 HOURS``
    (retention check off, as a user cleaning up hard does), which deletes the batch's files,
    not in the log yet. That batch fails with nothing committed and commits when run again;
    the replay of an earlier batch is skipped; the next batches land (read below)."""
    sink = DeltaSink(path=path)
    for batch in range(2):
        parts = [wide_batch(batch).slice(0, 3), wide_batch(batch).slice(3)]
        assert run(sink, batch, parts).status == "committed"
    table = f"delta.`{path}`"
    columns = ", ".join(
        f"id + {FOREIGN_OFFSET} AS id" if c == "id" else f"`{c}`"
        for c in wide_batch(0).schema.names
    )
    steps = [
        Sql(f"OPTIMIZE {table}"),
        Sql(f"INSERT INTO {table} SELECT {columns} FROM {table} WHERE id < 10"),
        Sql(f"VACUUM {table} RETAIN 0 HOURS"),
    ]
    conf = {**DELTA_SESSION, "spark.databricks.delta.retentionDurationCheck.enabled": "false"}
    results: list[Any] = []
    maintain = BeforeCommit(
        lambda: results.extend(run_reference(DELTA_SPARK_VERSION, ["delta"], steps, conf))
    )
    with pytest.raises(SinkError, match="the executors wrote are gone"):
        run(sink, 2, [wide_batch(2)], plugins=(maintain,))
    assert len(results) == len(steps)
    for result in results:
        result.ok()
    assert run(sink, 2, [wide_batch(2)]).status == "committed"
    assert run(sink, 1, [wide_batch(1)]).status == "skipped"
    for batch in range(3, 5):
        assert run(sink, batch, [wide_batch(batch)]).status == "committed"
    return path


@pytest.fixture(scope="module")
def reads(tables) -> dict[str, Any]:
    """Each table read whole by Delta's connector; then, per table, one query whose branches
    (``UNION ALL``) each scan the table with one predicate: Delta skips files for each scan by
    its own filter, as in a query of its own, in one Spark job per table."""
    whole = run_reference(
        DELTA_SPARK_VERSION,
        ["delta"],
        [Read("delta", path) for path, _ in tables.values()],
        conf=DELTA_SESSION,
    )
    out: dict[str, Any] = {}
    steps, names = [], []
    for (name, (path, types)), result in zip(tables.items(), whole):
        rows = result.ok()
        out[name] = {"rows": rows, "filtered": []}
        if name == "complete":  # the wide table's types and values again: read whole only
            continue
        out[name]["filtered"] = [(sql, passes, []) for sql, passes in predicates(rows, types)]
        branches = [
            f"SELECT {n} AS q, id FROM delta.`{path}` WHERE {sql}"
            for n, (sql, _, _) in enumerate(out[name]["filtered"])
        ]
        steps.append(Sql(" UNION ALL ".join(branches)))
        names.append(name)
    for name, result in zip(
        names, run_reference(DELTA_SPARK_VERSION, ["delta"], steps, conf=DELTA_SESSION)
    ):
        for row in result.ok():
            out[name]["filtered"][row["q"]][2].append(row["id"])
    return out


def as_expected(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The connector's rows as :func:`test_readers.expected` gives them."""
    out = []
    for r in rows:
        at = dt.datetime.fromisoformat(r["at"]).replace(tzinfo=UTC).timestamp()
        x = None if r["x"] in (None, "NaN") else r["x"]
        out.append((r["id"], x, at, r["s"], r["p"]))
    return sorted(out, key=lambda r: r[0])


@pytest.mark.parametrize("name", ["partitioned", "maintained"])
def test_partitioned_tables_read_whole(reads, name):
    assert as_expected(reads[name]["rows"]) == expected()


def test_every_type_reads_whole(reads):
    rows = sorted(reads["wide"]["rows"], key=lambda r: r["id"])
    want = [r for b in range(3) for r in wide_batch(b).to_pylist()]
    assert [r["id"] for r in rows] == [r["id"] for r in want]
    for got, row in zip(rows, want):
        assert got["s"] == row["s"] and got["i32"] == row["i32"] and got["b"] == row["b"]
        assert got["d"] == (None if row["d"] is None else str(row["d"]))
        assert got["day"] == (None if row["day"] is None else row["day"].isoformat())
        assert got["st"] == row["st"]
        for column in ("f32", "f64"):
            value = row[column]
            if value is None or math.isnan(value):
                assert got[column] in (None, "NaN") and (got[column] is None) == (value is None)
            elif math.isinf(value):
                assert got[column] == ("Infinity" if value > 0 else "-Infinity")
            else:
                assert got[column] == value


def test_a_table_maintained_by_delta_spark_holds_every_row_once(reads):
    ids = sorted(r["id"] for r in reads["maintained-by-spark"]["rows"])
    foreign = [r["id"] + FOREIGN_OFFSET for r in wide_batch(0).to_pylist()]
    assert ids == sorted([r["id"] for b in range(5) for r in wide_batch(b).to_pylist()] + foreign)


def test_complete_mode_holds_the_last_batch_only(reads):
    ids = sorted(r["id"] for r in reads["complete"]["rows"])
    assert ids == sorted(r["id"] for r in wide_batch(2).to_pylist())


def wrong_reads(reads: dict[str, Any], name: str, nan: bool) -> list[str]:
    wrong = []
    for sql, passes, ids in reads[name]["filtered"]:
        if (sql in NAN_PREDICATES) != nan:
            continue
        got = sorted(ids)
        if got != sorted(passes):
            wrong.append(f"{sql}: {len(got)} rows, the whole read passes {len(passes)}")
    return wrong


@pytest.mark.parametrize("name", ["partitioned", "wide", "maintained", "maintained-by-spark"])
def test_filtered_reads_return_the_rows_the_whole_read_passes(reads, name):
    wrong = wrong_reads(reads, name, nan=False)
    assert not wrong, "\n".join(wrong)
    assert len(reads[name]["filtered"]) >= 2 * len(PARTITIONED)


@pytest.mark.xfail(
    strict=True,
    reason="a float column holding NaN: Parquet footers leave NaN out of min/max and Spark "
    "orders NaN above every number, so Delta's reader skips the file for `f = NaN` and "
    '`f > max` (0 rows of 1); a max of "NaN", as Delta\'s own writer writes it, did not help '
    "either (in CI); leaving the bounds out fixes Delta's reader but makes delta-rs' pyarrow "
    "dataset skip the file for every filter (issue 36)",
)
def test_filtered_reads_of_nan_return_the_rows_the_whole_read_passes(reads):
    wrong = wrong_reads(reads, "wide", nan=True)
    assert not wrong, "\n".join(wrong)
