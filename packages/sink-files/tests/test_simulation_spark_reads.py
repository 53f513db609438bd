"""Spark's reader for files among the files kit's filtered readers: at a history's end, Spark's
own file source reads the folder (through its ``_spark_metadata`` log) with a WHERE on one
column, and must return exactly the rows a full scan filtered in memory returns.

The kit's sweep (:func:`eosink.testing.simulation_judge.sweep`: every column ``IS NULL``, equal
to each value it holds, between its least and greatest, and the row id of each batch) is what
Spark prunes by: partition folders by its own parsing of eosink's folder names (floats,
decimals, dates, timestamps, strings with escapes, Hive's null folder), Parquet row groups by
their statistics and dictionaries, JSON and CSV rows by the filters pushed into its parsers.
Each history is one Spark job: a ``UNION ALL`` of one filtered ``SELECT`` per predicate,
tagged with the predicate's number, every branch a scan of its own that prunes by its own
predicate; the plan is checked to prune (a partition filter on a partition column, a pushed
filter on a data column) before the job runs. During the history the target has no filtered
reader: a Spark job per step would cost more than the history.

Spark cannot read the kit's ``faulty://`` store: at the sweep the folder is copied to a local
folder, its log's paths moved there (only their prefix, the folder's URI, changes: the
percent-encoded rest is Spark's to decode). The histories are the files kit's
(:class:`test_simulation.TestFilesSimulation`), fewer, with the kit's wide values in data
columns (strings past the Parquet statistics' limits, line separators, the timestamps of
years 1 and 9999); their writers keep the history's format and their folders are not
damaged (the refusals are the files kit's to judge). :func:`odd_history` writes the values
where Spark's reader goes its own way, in every format, whatever the derandomized histories
draw.

Spark's reader is read as a user reads the folder: the source's schema, partition columns
last (the log's index takes the whole schema for the files' columns: a partition column
first shifts every CSV field), CSV with ``header`` and ``multiLine`` (a line break in a value
is quoted, as Spark's own CSV writer quotes it). What it is not asked, and why:

* Parquet, a float column holding -0.0, a bound of zero: Spark's Parquet filters compare by
  bits and skip the row group (:func:`declined`);
* a date or a time zone's timestamp of 1582-10-05 to 1582-10-14 as a bound: Spark's
  pushdown passes it as a ``java.sql.Date`` or ``Timestamp``, whose calendar has no such day
  (:func:`declined`).

Both read the same in folders Spark's own file sink wrote.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import math
import pathlib
import re
import shutil
import tempfile
import uuid
from typing import Any

import attrs
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import strategies as st
import test_simulation
from spark_manifest_oracle import OracleError, folder_format, read_committed

from eosink.spark.session import session_conf
from eosink.testing.faultfs import ObjectStore
from eosink.testing.partition_values import HIVE_NULL
from eosink.testing.simulation import HistorySpec, Predicate, Script, SimTarget, row_id
from eosink.testing.simulation_judge import sweep

READER = "Spark's reader for files"
#: The folder the files kit writes into, in its store (``store.url(FOLDER)``).
FOLDER = test_simulation.LOG.split("/", 1)[0]
INTERVAL = "spark.sql.streaming.fileSink.log.compactInterval"
TAG = "__predicate"
#: The sweep's query runs interpreted: its branches differ by their constants only, and
#: compiling code for each (Janino) cost twice what reading did. Pruning and pushdown are
#: the same either way (the Parquet scan hands on rows instead of column batches).
CHEAP = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}
#: The days the Julian calendar skipped, which a java.sql.Date cannot hold.
JULIAN_GAP = (dt.date(1582, 10, 5), dt.date(1582, 10, 15))


def spark_type(typ: pa.DataType) -> str:
    """The Spark SQL type a user reading the folder names for an Arrow type."""
    if pa.types.is_timestamp(typ):
        return "timestamp" if typ.tz else "timestamp_ntz"
    if pa.types.is_decimal(typ):
        return f"decimal({typ.precision},{typ.scale})"
    names = {
        pa.int8(): "tinyint",
        pa.int16(): "smallint",
        pa.int32(): "int",
        pa.int64(): "bigint",
        pa.float32(): "float",
        pa.float64(): "double",
        pa.bool_(): "boolean",
        pa.string(): "string",
        pa.binary(): "binary",
        pa.date32(): "date",
    }
    return names[typ]


def literal(value: Any, typ: pa.DataType) -> str:
    """``value`` as Spark SQL text of a constant of exactly the column's type (of another
    type, the column would be cast, and a cast column is neither pruned nor pushed down).
    Text and bytes go as hexadecimal, so that no character needs escaping."""
    if pa.types.is_boolean(typ):
        return "TRUE" if value else "FALSE"
    if pa.types.is_binary(typ):
        return f"X'{bytes(value).hex()}'"
    if pa.types.is_string(typ):
        return f"CAST(X'{value.encode().hex()}' AS STRING)"
    if pa.types.is_floating(typ):
        text = repr(value)  # the shortest text of the double; Spark casts inf and -inf too
    elif pa.types.is_decimal(typ):
        text = format(value, "f")
    elif pa.types.is_timestamp(typ):
        text = value.isoformat(sep=" ")
    elif pa.types.is_date(typ):
        text = value.isoformat()
    else:
        text = str(value)
    return f"CAST('{text}' AS {spark_type(typ)})"


def where(predicate: Predicate, typ: pa.DataType) -> str:
    column = f"`{predicate.column}`"
    if predicate.op == "is_null":
        return f"{column} IS NULL"
    if predicate.op == "eq":
        return f"{column} = {literal(predicate.value, typ)}"
    low, high = literal(predicate.value, typ), literal(predicate.high, typ)
    return f"{column} BETWEEN {low} AND {high}"


def declined(
    spec: HistorySpec, fmt: str, rows: list[dict[str, Any]], predicate: Predicate
) -> str | None:
    """Why Spark's reader is not asked ``predicate`` (where its answer differs from the
    kit's filter in memory by Spark's doing, not the sink's), or None."""
    field = spec.schema.field(predicate.column)
    bounds = [] if predicate.op == "is_null" else [predicate.value, predicate.high]
    if (
        fmt == "parquet"
        and pa.types.is_floating(field.type)
        and field.name not in spec.partition_by
        and any(b == 0 for b in bounds if b is not None)
        and any(_negative_zero(r.get(field.name)) for r in rows)
    ):
        # Spark's Parquet filters (parquet-mr's) order floats as Java's Float.compare and
        # Double.compare do, -0.0 below 0.0: a row group holding -0.0 is skipped for "=
        # 0.0" or ">= 0.0", which SQL (and a scan without pushdown) passes. Spark's own
        # file sink's files read the same: of 1000 rows of -0.0 it wrote, "WHERE x = 0.0"
        # reads none.
        return "-0.0 in Parquet row groups"
    if field.name not in spec.partition_by and any(_in_julian_gap(b) for b in bounds):
        # Spark hands a pushed-down date (timestamp) to the formats' filters as a
        # java.sql.Date (Timestamp), whose calendar, Julian before 1582-10-15, has no
        # 1582-10-05 to 1582-10-14: "= DATE '1582-10-10'" looks for 1582-10-20 and skips
        # the row (Parquet row groups, JSON's parser); without pushdown, or with
        # spark.sql.datetime.java8API.enabled, it is read. Spark's own file sink's files
        # read the same. (A timestamp without time zone goes as a LocalDateTime: read.)
        return "a date or timestamp in the Julian calendar's gap"
    return None


def _in_julian_gap(value: Any) -> bool:
    """A date, or a time zone's timestamp within a day of one (the JVM's zone converts it),
    that the Julian calendar skipped."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            return False
        day = value.astimezone(dt.timezone.utc).date()
        return JULIAN_GAP[0] - dt.timedelta(days=1) <= day <= JULIAN_GAP[1]
    return isinstance(value, dt.date) and JULIAN_GAP[0] <= value < JULIAN_GAP[1]


def _negative_zero(value: Any) -> bool:
    return isinstance(value, float) and value == 0 and math.copysign(1.0, value) < 0


def copy_folder(store: ObjectStore, local: pathlib.Path) -> pathlib.Path:
    """The kit's folder in ``store``, copied under ``local``; its log's paths, the folder's
    ``faulty://`` URI and the rest, now name the copy (only that prefix changes)."""
    prefix = f"{store.name}/{FOLDER}/"
    root = local / FOLDER
    old = f'"path":"{store.url(FOLDER)}'.encode()
    new = f'"path":"{root.as_uri()}'.encode()
    keys = [key for key in list(store.objects) if key.startswith(prefix)]
    for key in keys:
        data, _ = store.objects[key]
        relative = key[len(prefix) :]
        if relative.startswith("_spark_metadata/"):
            data = data.replace(old, new)
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def spark_reads(
    spark: Any,
    store: ObjectStore,
    spec: HistorySpec,
    rows: list[dict[str, Any]],
    predicates: list[Predicate],
) -> dict[Predicate, pa.Table | None]:
    """What Spark's reader for files returns for each predicate (None: declined), in one job.
    ``rows``: what the folder holds (the judge's full scan), for the declines."""
    out: dict[Predicate, pa.Table | None] = dict.fromkeys(predicates)
    local = pathlib.Path(tempfile.mkdtemp(prefix="eosink-spark-reads-"))
    try:
        root = copy_folder(store, local)
        if not (root / "_spark_metadata").exists():
            return out  # nothing was written: Spark finds no folder to read
        interval, fmt = folder_shape(root, spec)
        asked = [p for p in predicates if declined(spec, fmt, rows, p) is None]
        if not asked:
            return out
        view = f"eosink_spark_reads_{uuid.uuid4().hex}"
        columns = ", ".join(f"`{n}`" for n in spec.schema.names)
        sql = " UNION ALL ".join(
            f"SELECT {i} AS {TAG}, {columns} FROM {view} "
            f"WHERE {where(p, spec.schema.field(p.column).type)}"
            for i, p in enumerate(asked)
        )
        with contextlib.ExitStack() as confs:
            for key, value in {INTERVAL: str(interval), **CHEAP}.items():
                confs.enter_context(session_conf(spark, key, value))
            spark_reader(spark, spec, fmt).load(str(root)).createOrReplaceTempView(view)
            try:
                # One task for the whole job: each branch's scan is small, and a task per
                # branch (per file, unless packed) would cost more than reading.
                query = spark.sql(sql).coalesce(1)
                check_pruned(query, asked)
                table = query.toArrow()
            finally:
                spark.catalog.dropTempView(view)
        tags = table.column(TAG)
        for i, p in enumerate(asked):
            out[p] = table.filter(pc.equal(tags, i)).drop_columns([TAG])
        return out
    finally:
        shutil.rmtree(local, ignore_errors=True)


def folder_shape(root: pathlib.Path, spec: HistorySpec) -> tuple[int, str]:
    """The folder's compaction interval and format, as the kit's judge finds them: the first
    interval a writer drew that reads the log (it matters only before the log's first
    compact), and the one format the listed files' names give."""
    drawn = [spec.options, *(spec.own_options(w) for w in range(spec.writers))]
    intervals = dict.fromkeys(
        o.get("compact_interval", spec.options["compact_interval"]) for o in drawn
    )
    failures = []
    for interval in intervals:
        try:
            _, files = read_committed(
                str(root), spec.schema, spec.partition_by, format=None, compact_interval=interval
            )
            return interval, folder_format(files)
        except OracleError as exc:
            failures.append(exc)
    raise failures[0]


def spark_reader(spark: Any, spec: HistorySpec, fmt: str) -> Any:
    """``spark.read`` as a user reads the folder: the source's schema, in its format."""
    # Partition columns last: where the log is read (MetadataLogFileIndex), Spark takes the
    # whole user schema for the files' columns, so a partition column named before a data
    # column shifts every later CSV field by one (Spark's own file sink's folders read the
    # same; Parquet and JSON read columns by name).
    fields = sorted(spec.schema, key=lambda f: f.name in spec.partition_by)
    reader = spark.read.schema(", ".join(f"`{f.name}` {spark_type(f.type)}" for f in fields))
    if fmt == "csv":
        # multiLine: a value holding a line break is quoted, as Spark's own CSV writer
        # quotes it, and only a multiLine read reads it whole.
        reader = reader.option("header", "true").option("multiLine", "true")
    return reader.format(fmt)


def check_pruned(query: Any, asked: list[Predicate]) -> None:
    """Each branch of ``query`` scans with its own predicate: a partition filter where its
    column is a partition column, a filter pushed down to the format's reader otherwise
    (more than the ``IS NOT NULL`` Spark adds to a comparison)."""
    leaves = query._jdf.queryExecution().executedPlan().collectLeaves()
    assert leaves.size() == len(asked), f"{leaves.size()} scans for {len(asked)} predicates"
    for i, predicate in enumerate(asked):
        scan = leaves.apply(i)
        # A folder whose log lists no file has no partition folders: Spark then takes every
        # column for a data column.
        if predicate.column in scan.relation().partitionSchema().fieldNames():
            filters = scan.partitionFilters().mkString(", ")
        else:
            filters = scan.metadata().get("PushedFilters").get()
        pruning = re.sub(r"(?i)isnotnull\([^)]*\)", "", filters)
        assert (
            predicate.column in pruning
        ), f"{READER} WHERE {predicate}: the scan does not prune by it ({filters or 'none'})"


class SparkSweep:
    """A history whose sweep at its end also reads through Spark's reader for files: one
    job for all of the sweep's predicates, its rows handed to the judge one predicate at a
    time (``spark_*`` in the history's stats: the predicates asked, declined, on partition
    columns, and the folder's format)."""

    env: Any
    spec: HistorySpec
    target: Any
    _rows: Any
    stats: Any

    def check_filtered_sweep(self) -> None:
        if self.target is None:
            return
        rows = self._rows(self.target.read())
        predicates = sweep(self.spec.schema, rows)
        reads = spark_reads(self.env, self.target.store, self.spec, rows, predicates)
        asked = [p for p, read in reads.items() if read is not None]
        self.stats["spark_predicates"] += len(asked)
        self.stats["spark_declined"] += len(reads) - len(asked)
        self.stats["spark_partition_predicates"] += sum(
            p.column in self.spec.partition_by for p in asked
        )
        self.stats[f"spark_{self.spec.options['format']}"] += 1
        self.target.filtered[READER] = lambda predicate: reads.get(predicate)
        try:
            super().check_filtered_sweep()  # type: ignore[misc]
        finally:
            self.target.filtered.pop(READER, None)


class TestFilesSparkReadsSimulation(test_simulation.TestFilesSimulation):
    """The files kit's histories, fewer, with wide values in data columns, each writer in
    the history's format, never damaged, swept at their end through Spark's reader."""

    simulation_examples = 8
    simulation_wide_values = True

    def simulation_writer_options(self, spec: HistorySpec) -> st.SearchStrategy[dict[str, Any]]:
        """The kit's, but in the history's format: Spark reads a folder in one format, and
        the refusal of a writer of another is :class:`TestFilesSimulation`'s to judge."""
        drawn = super().simulation_writer_options(spec)
        return drawn.filter(lambda options: "format" not in options)

    def simulation_target(self, spec: HistorySpec, env: Any) -> SimTarget:
        """The kit's target, never damaged: a damaged folder ends its history unswept (the
        refusal is :class:`TestFilesSimulation`'s to judge)."""
        return attrs.evolve(super().simulation_target(spec, env), damage=None)

    @pytest.fixture
    def simulation_env(self, spark: Any) -> Any:
        return spark

    def history_machine(self, env: Any) -> type:
        machine = super().history_machine(env)
        return type(machine.__name__, (SparkSweep, machine), {})


UTC = dt.timezone.utc
D = decimal.Decimal
#: Values where Spark's parsing of partition folders, its pushdown and its formats' parsers
#: may go wrong, eight of each type (a row each): column -> (type, values).
ODD_VALUES: dict[str, tuple[pa.DataType, list[Any]]] = {
    "c0_string": (
        pa.string(),
        ["", "a/b", "%2F", HIVE_NULL, "ü =x", "{[]}^'#*?:\\\"", "\x01\t\n", None],
    ),
    "c1_float64": (pa.float64(), [-0.0, 0.0, math.nan, math.inf, -math.inf, 1e20, -1.5e-7, None]),
    "c2_date": (
        pa.date32(),
        [
            dt.date(1, 1, 1),
            dt.date(9999, 12, 31),
            dt.date(1582, 10, 10),
            dt.date(1969, 12, 31),
            dt.date(2000, 2, 29),
            dt.date(1582, 10, 4),
            dt.date(1970, 1, 1),
            None,
        ],
    ),
    "c3_timestamp": (
        pa.timestamp("us"),
        [
            dt.datetime(1, 1, 1),
            dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
            dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
            dt.datetime(2024, 1, 1, 0, 0, 0, 1),
            dt.datetime(1582, 10, 10),
            dt.datetime(1900, 1, 1),
            dt.datetime(2200, 1, 1),
            None,
        ],
    ),
    "c4_timestamp_utc": (
        pa.timestamp("us", tz="UTC"),
        [
            dt.datetime(1, 1, 1, tzinfo=UTC),
            dt.datetime(9999, 12, 31, 23, 59, 59, 999999, UTC),
            dt.datetime(1582, 10, 10, tzinfo=UTC),
            dt.datetime(1969, 12, 31, 23, 59, 59, 1, UTC),
            dt.datetime(2024, 3, 31, 2, 30, tzinfo=UTC),
            dt.datetime(1900, 1, 1, tzinfo=UTC),
            dt.datetime(2200, 1, 1, tzinfo=UTC),
            None,
        ],
    ),
    "c5_decimal": (
        pa.decimal128(12, 3),
        [
            D("0"),
            D("-0.001"),
            D("99999999.999"),
            D("-99999999.999"),
            D("1.5"),
            D("0.100"),
            D("12345.678"),
            None,
        ],
    ),
    "c6_decimal_fine": (
        pa.decimal128(20, 10),
        [
            D("0E-10"),
            D("1E-7"),
            D("-1E-7"),
            D("1E-10"),
            D("1000000000"),
            D("-1000000000"),
            D("0.5"),
            None,
        ],
    ),
    "c7_float32": (pa.float32(), [-0.0, 0.0, math.nan, math.inf, -math.inf, 1e20, 1e-45, None]),
    "c8_float64": (pa.float64(), [-0.0, 0.0, math.nan, math.inf, -math.inf, 5e-324, 1e308, None]),
    "c9_string": (
        pa.string(),
        ["", " ", "s" * 4097, "b" * 32 + "c", "line\u2028sep", "ü", "next\u0085line", None],
    ),
    "c10_int64": (pa.int64(), [0, -1, 2**63 - 1, -(2**63), 1, 2, 3, None]),
    "c11_bool": (pa.bool_(), [True, False, None, True, False, None, True, False]),
    "c12_binary": (pa.binary(), [b"", b"\x00", b"\xff", b"a", b"\x00\xff", b"ab", b"\x80", None]),
}


#: The partition columns of :func:`odd_history`'s first history (the rest: its second's).
ODD_PARTITIONS = ("c0_string", "c1_float64", "c2_date")


def odd_history(spark: Any, fmt: str, partitioned: bool) -> Any:
    """One batch of :data:`ODD_VALUES`, a row group a row, then Spark's recovery and the
    sweep through Spark's reader: the history, its stats counted. ``partitioned``: the
    columns :data:`ODD_PARTITIONS`, partitioning by them all, else the others (binary left
    out of CSV, which refuses it), unpartitioned. (Each branch of the sweep's query opens
    every file it does not prune: data columns go into one file.)"""
    names = [
        n
        for n in ODD_VALUES
        if (n in ODD_PARTITIONS) == partitioned and not (fmt == "csv" and n == "c12_binary")
    ]
    schema = pa.schema(
        [pa.field("id", pa.int64(), nullable=False), *((n, ODD_VALUES[n][0]) for n in names)]
    )
    rows = [{"id": row_id(0, 0, 0, i), **{n: ODD_VALUES[n][1][i] for n in names}} for i in range(8)]
    history = TestFilesSparkReadsSimulation().history_machine(spark)()
    options = {"compact_interval": 2, "log_cleanup_delay_s": 0.0, "format": fmt}
    own = {"fingerprint": "off", "row_group_size": 1}
    partition_by = ODD_PARTITIONS if partitioned else ()
    history.start(Script((schema, partition_by), 1, options, "append", own))
    batch = pa.RecordBatch.from_pylist(rows, schema=schema)
    history.run(Script(history.writers[0], [len(rows)], batch, None), batches=1)
    history.teardown()  # recovery, then every predicate of the sweep through Spark's reader
    return history


@pytest.mark.parametrize("fmt", ["parquet", "json", "csv"])
def test_odd_values_read_back_filtered_by_sparks_reader(spark: Any, fmt: str) -> None:
    """The values where Spark's reader may go its own way, in partition folders (strings
    with escapes and Hive's null folder, -0.0, NaN, infinities, dates of years 1 and 9999)
    and in data columns (a row group a row, so Parquet's statistics skip every other row):
    each predicate of the sweep reads through Spark's reader exactly what a full scan
    filtered in memory reads, but the few Spark itself gets wrong (:func:`declined`)."""
    stats = odd_history(spark, fmt, partitioned=True).stats
    assert stats["spark_partition_predicates"] >= 20 and not stats["spark_declined"], stats
    stats = odd_history(spark, fmt, partitioned=False).stats
    assert stats["spark_predicates"] >= 70 and stats["spark_declined"] <= 4, stats
