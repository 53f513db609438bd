"""The delta sink passes the kit's generated histories (:mod:`eosink.testing.simulation`),
judged by delta-rs' own reader (``DeltaTable(...).to_pyarrow_table()``, with a row count by its
SQL reader, which reads the files' stats), never by eosink_delta's helpers: on local disk, and
on the loopback S3 server with store faults.

What a history draws besides the kit's dimensions (writers, crashes, zombies, commits from
fresh workers, cleanup, the clock): the sink options that change how it writes (small row
groups, no stats) and, for some histories, a table made beforehand by its owner with the
properties that change the log's life: a checkpoint every few commits, and a log retention of
zero, so that every checkpoint removes the commits before it.

``TestDeltaFilteredSimulation`` adds the kit's filtered reads (delta-rs' pyarrow dataset and
its SQL reader, delta-kernel-rs through polars and inside DuckDB's ``delta_scan``, which skip
files by the add actions' stats and partition values) and its wide values (long strings,
line separators, timestamps of years 1 and 9999). It found what the bounds left out or
overflowed: a float column holding an infinity had no bounds, which delta-rs' pyarrow dataset
reads as ``col >= null`` (``WHERE c0_float32 = -inf`` read 0 of its row), and a timestamp in
the last millisecond of year 9999 failed the batch (its max rounded up past the year);
``test_file_stats.py`` holds both.
"""

from __future__ import annotations

import decimal
import math
import shutil
import tempfile
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import attrs
import delta_foreign
import polars as pl
import polars_deltalake
import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from deltalake import DeltaTable, QueryBuilder, write_deltalake
from delta_foreign import delta_foreign_steps
from delta_helpers import duckdb_with_delta
from deltalake.exceptions import TableNotFoundError
from eosink_delta.sink import DeltaSink
from hypothesis import strategies as st

from eosink.testing.arrow_data import COLUMN_TYPES
from eosink.testing.partition_values import HIVE_NULL
from eosink.testing.s3 import S3Endpoint, S3Faults, S3FaultTarget
from eosink.testing.simulation import (
    ForeignStep,
    HistorySpec,
    Predicate,
    SimTarget,
    SinkSimulation,
)
from eosink.testing.simulation_foreign import FOREIGN_WRITER
from eosink.testing.simulation_model import batch_of

#: Every type of the kit: the delta sink stores them all (schema.py refuses none of them).
DELTA_TYPES = tuple(COLUMN_TYPES)
#: What it partitions by: the simple types, but binary, which it refuses (readers change the
#: values), and decimal, whose negative values deltalake's pyarrow reader, the judge here,
#: cannot read (test_simulation_found.py shows the sink writes them right).
PARTITION_TYPES = (
    "float32",
    "float64",
    "int8",
    "int16",
    "int32",
    "int64",
    "bool",
    "string",
    "date",
    "timestamp",
    "timestamp_utc",
)
#: Table properties of a table made beforehand (none: the sink makes the table itself).
TABLE_PROPERTIES = st.one_of(
    st.just({}),
    st.fixed_dictionaries(
        {
            "delta.checkpointInterval": st.sampled_from(["2", "3"]),
            "delta.logRetentionDuration": st.sampled_from(
                ["interval 0 seconds", "interval 30 days"]
            ),
        }
    ),
)


def sink_options() -> st.SearchStrategy[dict[str, Any]]:
    """The sink's keyword options of a history, and under ``table_properties`` those of a
    table its owner makes beforehand (the sink has no option for them, as a user sets them)."""
    return st.fixed_dictionaries(
        {
            "row_group_rows": st.sampled_from([1_000_000, 2]),
            "stats": st.booleans(),
            "table_properties": TABLE_PROPERTIES,
        }
    )


def dataset_filter(predicate: Predicate) -> ds.Expression:
    """The predicate as a pyarrow dataset expression."""
    column = ds.field(predicate.column)
    if predicate.op == "is_null":
        return column.is_null()
    if predicate.op == "eq":
        return column == predicate.value
    return (column >= predicate.value) & (column <= predicate.high)


def carried_exactly(value: Any) -> bool:
    """Whether polars' delta-kernel-rs plugin gets a literal exactly. It receives the filter
    as a serialized polars expression whose float parser is exact only on Clinger's fast path
    (at most 2**53 as decimal digits, a decimal exponent within +-22): other doubles may come
    out one ulp off, so equality misses rows on a table delta-rs wrote itself
    (``2 ** 70``, ``1.5e-243``: test_the_kernel_reader_misses_doubles_it_cannot_carry), and an
    infinite one does not deserialize at all. Such a predicate is the reader's limit."""
    if not isinstance(value, float):
        return True
    if not math.isfinite(value):
        return False
    sign, digits, exponent = decimal.Decimal(repr(value)).as_tuple()
    mantissa = int("".join(map(str, digits)))
    return mantissa <= 2**53 and -22 <= int(exponent) <= 22


def polars_filter(predicate: Predicate) -> Any:
    """The predicate as a polars expression (delta-kernel-rs pushes it down); None when it
    holds a float the reader cannot carry (:func:`carried_exactly`)."""
    if not (carried_exactly(predicate.value) and carried_exactly(predicate.high)):
        return None
    column = pl.col(predicate.column)
    if predicate.op == "is_null":
        return column.is_null()
    if predicate.op == "eq":
        return column == pl.lit(predicate.value)
    return (column >= pl.lit(predicate.value)) & (column <= pl.lit(predicate.high))


def sql_where(predicate: Predicate, field: pa.Field) -> tuple[str, list[Any]] | None:
    """The predicate as a SQL condition with ``?`` parameters (DuckDB binds Python values);
    None for a binary column (no comparison the readers share)."""
    if pa.types.is_binary(field.type) or pa.types.is_large_binary(field.type):
        return None
    column = '"' + predicate.column + '"'
    if predicate.op == "is_null":
        return f"{column} IS NULL", []
    if predicate.op == "eq":
        return f"{column} = ?", [predicate.value]
    return f"{column} BETWEEN ? AND ?", [predicate.value, predicate.high]


def datafusion_literal(value: Any, field: pa.Field) -> str | None:
    """``value`` as a literal of DataFusion's SQL (delta-rs' ``QueryBuilder`` takes no
    parameters); None for what it has no plain literal of: timestamps (their time zones
    compare by rules of their own), non-finite floats, binary."""
    kind = field.type
    if pa.types.is_boolean(kind):
        return "TRUE" if value else "FALSE"
    if pa.types.is_integer(kind):
        return str(int(value))
    if pa.types.is_floating(kind):
        if not math.isfinite(value):
            return None
        return f"CAST({value!r} AS {'FLOAT' if pa.types.is_float32(kind) else 'DOUBLE'})"
    if pa.types.is_decimal(kind):
        if kind.precision > 15:
            # delta-rs reads a decimal's stats as doubles: past 15 digits a bound rounds, and
            # a file can be skipped for a value it holds (its own tables too)
            return None
        return f"CAST('{value:f}' AS DECIMAL({kind.precision}, {kind.scale}))"
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return "'" + value.replace("'", "''") + "'"
    if pa.types.is_date32(kind):
        return f"DATE '{value.isoformat()}'"
    return None


def delta_target(spec: HistorySpec, uri: str, storage: dict[str, str], **rest: Any) -> SimTarget:
    """A target on ``uri``: a fresh sink per call, delta-rs as the reader, and as the damage a
    CHECK constraint added by hand (the delta-rs engine cannot enforce one: it must refuse)."""
    options = dict(spec.options)
    properties = options.pop("table_properties", {})
    reader_options = storage or None
    if properties:
        DeltaTable.create(
            uri,
            spec.schema,
            partition_by=list(spec.partition_by) or None,
            configuration=properties,
            storage_options=reader_options,
        )

    def make_sink() -> DeltaSink:
        return DeltaSink(
            path=uri,
            partition_by=spec.partition_by,
            storage_options=storage,
            **options,
        )

    def read() -> Any:
        try:
            table = DeltaTable(uri, storage_options=reader_options)
        except TableNotFoundError:
            return []
        rows = table.to_pyarrow_table()
        # The same snapshot through delta-rs' SQL reader, which also reads the files' stats
        # (the pyarrow reader does not): both must count the same rows.
        query = QueryBuilder().register("t", table).execute("select count(*) as n from t")
        counted = pa.table(query.read_all()).column("n")[0].as_py()
        assert (
            counted == rows.num_rows
        ), f"delta-rs' SQL reader counts {counted} rows, its pyarrow reader reads {rows.num_rows}"
        return rows

    def read_dataset(predicate: Predicate) -> Any:
        """delta-rs' pyarrow dataset, filtered: it skips files by their partition values and
        the add actions' stats (a bound left out reads as ``col >= null``, skipping all).
        Not for comparisons on a float column: it takes a file's bounds as holding for every
        row, and Parquet's bounds leave NaN out, so ``c BETWEEN 0 AND 5`` on a file of 0.0
        and NaN returns the NaN rows too (tables delta-rs' own writer writes, with the same
        bounds, read the same; delta-kernel reads them right)."""
        column = spec.schema.field(predicate.column)
        if pa.types.is_floating(column.type) and predicate.op != "is_null":
            return None
        try:
            table = DeltaTable(uri, storage_options=reader_options)
        except TableNotFoundError:
            return []
        return table.to_pyarrow_dataset().to_table(filter=dataset_filter(predicate))

    def damage() -> None:
        table = DeltaTable(uri, storage_options=reader_options)
        table.alter.add_constraint({"id_not_negative": "id >= 0"})

    def read_kernel(predicate: Predicate) -> Any:
        """delta-kernel-rs through polars, filtered: it skips files by the add actions'
        stats and partition values as its own scan plans them."""
        try:
            DeltaTable(uri, storage_options=reader_options)
        except TableNotFoundError:
            return []
        expression = polars_filter(predicate)
        if expression is None:
            return None
        frame = polars_deltalake.scan_delta(uri, storage_options=reader_options)
        return frame.filter(expression).collect().to_arrow()

    def read_sql(predicate: Predicate) -> Any:
        """delta-rs' SQL reader (DataFusion), filtered: it prunes files by partition values
        and the add actions' stats, and row groups by the files' own."""
        where = sql_where(predicate, spec.schema.field(predicate.column))
        if where is None:
            return None
        condition, values = where
        field = spec.schema.field(predicate.column)
        if field.name in spec.partition_by and pa.types.is_floating(field.type) and 0 in values:
            # DataFusion compares float partition values in total order: -0.0 and 0.0 differ
            # (delta-rs' own tables read the same: test_simulation_found.py)
            return None
        for value in values:
            literal = datafusion_literal(value, field)
            if literal is None:
                return None
            condition = condition.replace("?", literal, 1)
        try:
            table = DeltaTable(uri, storage_options=reader_options)
        except TableNotFoundError:
            return []
        query = QueryBuilder().register("t", table).execute(f"select * from t where {condition}")
        return pa.table(query.read_all())

    def read_duckdb(predicate: Predicate) -> Any:
        """DuckDB's ``delta_scan`` (delta-kernel-rs inside DuckDB), filtered, the values bound
        as parameters: it prunes files by the add actions' stats and partition values."""
        where = sql_where(predicate, spec.schema.field(predicate.column))
        if where is None or storage:
            return None  # a local table only: the extension's S3 settings are its own
        try:
            DeltaTable(uri)
        except TableNotFoundError:
            return []
        condition, values = where
        con = duckdb_with_delta()
        try:
            query = f"select * from delta_scan('{uri}') where {condition}"
            return con.execute(query, values).fetch_arrow_table()
        finally:
            con.close()

    filtered = {
        "delta-rs pyarrow dataset": read_dataset,
        "delta-kernel-rs (polars)": read_kernel,
        "delta-rs SQL": read_sql,
        "DuckDB delta_scan": read_duckdb,
    }
    return SimTarget(sink=make_sink, read=read, damage=damage, filtered=filtered, **rest)


class DeltaHistories(SinkSimulation):
    """What both stores share: the types, the options, and what a Delta reader returns."""

    simulation_types = DELTA_TYPES
    simulation_partition_types = PARTITION_TYPES

    def simulation_options(self) -> st.SearchStrategy[dict[str, Any]]:
        return sink_options()

    #: Per history (``id`` of its spec): the foreign rows' (id, column) whose Hive null folder
    #: name delta-rs' writer stored as null (:func:`hive_nulls_written`).
    hive_nulls: dict[int, set[tuple[int, str]]] = {}

    def simulation_row(self, spec: HistorySpec, row: dict[str, Any]) -> dict[str, Any]:
        """Delta's protocol reads an empty partition value as null (as Spark writes "", and
        delta-rs' writer too). Hive's folder name for null, ``__HIVE_DEFAULT_PARTITION__``,
        eosink's writer takes as null; delta-rs' writer (the foreign rows, whose writer is
        ``FOREIGN_WRITER``) keeps it as the string, unless the same write put a null in the
        same folder (:func:`hive_nulls_written`)."""
        foreign = batch_of(row["id"])[0] == FOREIGN_WRITER
        as_null = self.hive_nulls.get(id(spec), set())

        def read(name: str, value: Any) -> Any:
            if name not in spec.partition_by:
                return value
            if value == "":
                return None
            if value == HIVE_NULL and (not foreign or (row["id"], name) in as_null):
                return None
            return value

        return {name: read(name, value) for name, value in row.items()}


def hive_nulls_written(rows: pa.Table, partition_by: tuple[str, ...]) -> set[tuple[int, str]]:
    """The (id, column) of the rows whose ``__HIVE_DEFAULT_PARTITION__`` delta-rs'
    ``write_deltalake`` stores as null: it groups a write's rows by their partition folder,
    where a null and that string share the name, and a folder holding a null in a column
    gets a null partition value there for all its rows (delta-rs 1.6)."""
    folders: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in rows.to_pylist():
        folder = tuple(HIVE_NULL if row[c] is None else row[c] for c in partition_by)
        folders.setdefault(folder, []).append(row)
    out = set()
    for members in folders.values():
        for column in partition_by:
            if any(r[column] is None for r in members):
                out.update((r["id"], column) for r in members if r[column] == HIVE_NULL)
    return out


class TestDeltaSimulation(DeltaHistories):
    simulation_examples = 24
    #: The local table of each target made (its foreign steps act on it).
    paths: dict[int, str] = {}
    #: The filtered readers and the wide values: in :class:`TestDeltaFilteredSimulation`.
    filtered = False

    def simulation_target(self, spec: HistorySpec, env: Any) -> SimTarget:
        folder = tempfile.mkdtemp(prefix="eosink-delta-sim-")
        target = delta_target(
            spec,
            f"{folder}/table",
            {},
            close=lambda: shutil.rmtree(folder, ignore_errors=True),
        )
        target = target if self.filtered else attrs.evolve(target, filtered={})
        self.paths[id(target)] = f"{folder}/table"
        return target

    def simulation_foreign_steps(
        self, spec: HistorySpec, target: SimTarget
    ) -> Mapping[str, ForeignStep]:
        """delta-rs appends, compacts, checkpoints, vacuums and cleans the log up between any
        two steps (``delta_foreign``); what each of its writes stores as null is noted for
        :meth:`simulation_row`."""
        as_null = self.hive_nulls[id(spec)] = set()
        steps = delta_foreign_steps(spec, self.paths.pop(id(target)))

        def noted(step: ForeignStep) -> ForeignStep:
            def run(hand: Any) -> Any:
                def write(path: str, rows: pa.Table, **options: Any) -> None:
                    as_null.update(hive_nulls_written(rows, spec.partition_by))
                    real(path, rows, **options)

                real = delta_foreign.write_deltalake
                delta_foreign.write_deltalake = write
                try:
                    return step(hand)
                finally:
                    delta_foreign.write_deltalake = real

            return run

        return {name: noted(step) for name, step in steps.items()}


class TestDeltaFilteredSimulation(TestDeltaSimulation):
    """Histories whose judge also reads with filters (delta-rs' pyarrow dataset and its SQL
    reader, delta-kernel-rs through polars and inside DuckDB's ``delta_scan``, which skip
    files by the add actions' stats and partition values) and whose data columns hold the
    values where stats go wrong (``simulation_wide_values``). A reader declines a predicate
    it cannot carry (its limit, shown on tables delta-rs writes in test_simulation_found.py)."""

    simulation_examples = 8
    simulation_wide_values = True
    filtered = True

    def simulation_foreign_steps(
        self, spec: HistorySpec, target: SimTarget
    ) -> Mapping[str, ForeignStep]:
        """None here: TestDeltaSimulation has them, and these examples are kept for the
        values where stats go wrong."""
        self.paths.pop(id(target), None)
        return {}


class TestDeltaUpsertSimulation(TestDeltaSimulation):
    """Keyed upserts (``mode="upsert"`` by the kit's key column, which later batches carry
    again): the judge expects per key the row of the latest visible batch that carried it,
    through the crashes, zombies, store faults and delta-rs' appends, compactions,
    checkpoints, vacuums and log cleanups between steps (``delta_foreign``)."""

    simulation_examples = 12
    simulation_upsert_key = "key_int64"

    def simulation_options(self) -> st.SearchStrategy[dict[str, Any]]:
        return sink_options().map(
            lambda options: {**options, "mode": "upsert", "key": [self.simulation_upsert_key]}
        )


class TestDeltaCompleteSimulation(TestDeltaSimulation):
    """Spark's complete output mode: every batch replaces the table's rows, while delta-rs
    appends, compacts, checkpoints, vacuums and cleans the log up between any two steps and
    inside commits (``delta_foreign``): the judge expects the rows of the batch that landed
    last, and another program's rows until a batch lands after them, never after."""

    simulation_examples = 10
    simulation_output_modes = ("complete",)


#: delta-rs retries a failed request quickly here, so that a history stays fast.
FAST_RETRIES = {"backoff_config.init_backoff": "5ms", "backoff_config.max_backoff": "20ms"}


class TestDeltaS3Simulation(DeltaHistories):
    """On S3, with store faults; delta-rs' client retries (``max_retries``) or not, which
    changes what a lost reply becomes: a conflict with itself, or a store error."""

    simulation_examples = 14
    # A batch asks S3 for about 5 to 15 things (its first, which makes the table, for more).
    simulation_store_requests = 12

    def simulation_options(self) -> st.SearchStrategy[dict[str, Any]]:
        retries = st.fixed_dictionaries({"max_retries": st.sampled_from(["0", "2"])})
        return st.tuples(sink_options(), retries).map(
            lambda both: {**both[0], "storage_options": both[1]}
        )

    @pytest.fixture
    def simulation_env(self, s3_endpoint: S3Endpoint, s3_faults: S3Faults) -> Any:
        return s3_endpoint, s3_faults

    def simulation_target(self, spec: HistorySpec, env: Any) -> SimTarget:
        endpoint, faults = env
        bucket = endpoint.create_bucket()
        options = dict(spec.options)
        storage = {
            **endpoint.object_store_options(),
            **FAST_RETRIES,
            **options.pop("storage_options"),
        }
        target = delta_target(
            attrs.evolve(spec, options=options),
            f"s3://{bucket}/table",
            storage,
            store=S3FaultTarget(faults),
        )
        return attrs.evolve(target, filtered={})  # filtered reads: TestDeltaFilteredSimulation


@pytest.mark.parametrize(
    "values",
    [
        [(HIVE_NULL, "x")],
        [("", "x"), (HIVE_NULL, "x")],
        [(HIVE_NULL, "x"), (None, "x")],
        [(None, "x"), (HIVE_NULL, "y"), (HIVE_NULL, None)],
        [(HIVE_NULL, HIVE_NULL), ("", None)],
    ],
)
def test_foreign_rows_read_as_the_judge_expects(tmp_path, values):
    """What the judge expects of delta-rs' own writes (the foreign rows) is what delta-rs
    stores: ``""`` reads as null, the Hive null folder name as the string, unless the write
    put a null in the same folder."""
    from eosink.testing.simulation_model import row_id

    path = str(tmp_path / "table")
    ids = [row_id(FOREIGN_WRITER, 1, 0, i) for i in range(len(values))]
    rows = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "s": pa.array([v[0] for v in values], pa.string()),
            "t": pa.array([v[1] for v in values], pa.string()),
        }
    )
    kit = TestDeltaSimulation()
    spec_like = SimpleNamespace(partition_by=("s", "t"))  # what simulation_row reads of a spec
    kit.hive_nulls[id(spec_like)] = hive_nulls_written(rows, ("s", "t"))
    write_deltalake(path, rows, partition_by=["s", "t"])
    read = sorted(DeltaTable(path).to_pyarrow_table().to_pylist(), key=lambda r: r["id"])
    expected = [kit.simulation_row(spec_like, row) for row in rows.to_pylist()]
    kit.hive_nulls.pop(id(spec_like))
    assert [{k: r[k] for k in ("id", "s", "t")} for r in read] == expected
