"""``stage_dataframe``: Spark's own writer stages a DataFrame batch into a folder.

Handing every row from the JVM to Python as Arrow costs more than a Spark writer spends on the
whole write, so a sink whose store Spark can write implements ``write_dataframe`` with this
helper: Spark writes the batch (format, options, ``partitionBy``) into a staging folder of the
attempt, the core counts the rows on the way (an ``Observation``; that count becomes the
proof's), and the sink gets the part files with their sizes to move into place: the files
Spark's job commit left (never ``_temporary/``, where attempts that were not committed write),
whose rows must add up to that count (:func:`check_staged_rows`). The folder is
removed when the ``with`` block ends, whatever happens. Partition columns are written by the
text of their folder (:func:`by_folder_text`), so values that share a folder never make Spark's
writer open one file name twice.

Executor plugins of the run (fault injection in tests) wrap every task of the staging write,
as they wrap ``write`` on the Arrow path, so a crash can hit this path half-way too. Their code
after the ``yield`` runs before that task's rows reach Spark's writer (the rows are handed on
lazily), not after them as on the Arrow path.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import attrs

from eosink.errors import StagedRowsMismatchError
from eosink.hookspecs import hookimpl
from eosink.registry import plugin_manager
from eosink.spark.session import MICROS_TIMESTAMPS, session_conf
from eosink.staging import current, record_rows


@attrs.frozen
class StagedFile:
    """One part file Spark wrote: its path inside the staging folder (with partition folders,
    e.g. ``day=2024-01-01/part-...parquet``) and its size in bytes."""

    relpath: str
    size: int


@attrs.frozen
class StagedFiles:
    """The batch as staged: part files, the core's row count, and the caller's metrics."""

    files: tuple[StagedFile, ...]
    rows: int
    metrics: Mapping[str, Any] = attrs.field(factory=dict)


@contextmanager
def stage_dataframe(
    df: Any,
    folder: str,
    *,
    format: str,  # noqa: A002 - Spark's word
    options: Mapping[str, str] | None = None,
    partition_by: Sequence[str] = (),
    metrics: Iterable[Any] = (),
) -> Iterator[StagedFiles]:
    """Write ``df`` with Spark into the local ``folder`` (which must not exist); yield the files.

    ``metrics`` are extra aggregate columns (``F.sum(...).alias("name")``) observed on the same
    pass, returned by name in ``metrics`` (e.g. nulls in a NOT NULL column). Timestamps are
    written as INT64 microseconds, as Arrow writers write them. The driver and Spark must share
    ``folder`` (a local or shared path; the caller checks that).
    """
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    observation = Observation()
    observed = _with_plugins(df).observe(observation, F.count(F.lit(1)).alias("rows"), *metrics)
    if partition_by:
        observed = by_folder_text(observed, partition_by)
    writer = (
        observed.write.format(format).options(**dict(options or {}))
        # no _SUCCESS marker: the sink's commit says what is committed
        .option("mapreduce.fileoutputcommitter.marksuccessfuljobs", "false")
    )
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    try:
        with session_conf(df.sparkSession, *MICROS_TIMESTAMPS):
            writer.save("file://" + folder)
        seen = dict(observation.get)
        rows = int(seen.pop("rows"))
        files = committed_part_files(folder)
        check_staged_rows(folder, files, format, rows)
        record_rows(rows)
        yield StagedFiles(files=files, rows=rows, metrics=seen)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


#: The folder Spark's writer gives null (and ``""``, and this very string).
DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"


def by_folder_text(df: Any, partition_by: Sequence[str]) -> Any:
    """``df`` with each partition column replaced by the text of its folder (null: default).

    Spark's writer sorts a task's rows by the partition values and starts a new file, named
    ``part-<task>-<job>.c000`` afresh in each folder, whenever the *value* changes. Values that
    differ but share a folder then reopen that folder under a name it already holds, and the
    task fails with Hadoop's ``FileAlreadyExistsException``: ``-0.0`` and ``0.0`` (equal in the
    sort, so interleaved, but two folders), null and the string ``__HIVE_DEFAULT_PARTITION__``
    (one folder, two sorted runs). Spark's own ``partitionBy`` fails on them too. Partitioned by
    the folder text itself (Spark's ``cast(v as string)``, which names the folder anyway, with
    ``""`` and the default name as null), equal texts are one sorted run and one file: the same
    folders, each visited once.
    """
    from pyspark.sql import functions as F

    texts = {}
    for name in partition_by:
        text = F.col(_quoted(name)).cast("string")
        texts[name] = F.when(text.isin("", DEFAULT_PARTITION), F.lit(None)).otherwise(text)
    return df.withColumns(texts)


def _quoted(name: str) -> str:
    """A column name as Spark's parser takes it literally (``a.b`` is not a field of ``a``)."""
    return "`" + name.replace("`", "``") + "`"


def _hidden(name: str) -> bool:
    """Spark's rule for names its file index skips: ``_x`` (but not a partition folder
    ``_x=v``) and ``.x``. ``_temporary`` holds task attempts that were not committed."""
    return (name.startswith("_") and "=" not in name) or name.startswith(".")


def committed_part_files(folder: str) -> tuple[StagedFile, ...]:
    """The part files of ``folder`` that Spark's job commit left, in their partition folders.

    Hidden folders are not walked: ``_temporary/`` holds the files of task attempts that were
    not committed (a speculative copy, a killed task that kept writing after the job's commit
    removed the folder), which are not the batch's.
    """
    found = []
    for here, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not _hidden(d))
        for name in sorted(n for n in names if n.startswith("part-")):  # not .crc side files
            path = os.path.join(here, name)
            found.append(StagedFile(os.path.relpath(path, folder), os.path.getsize(path)))
    return tuple(found)


def _rows_in(path: str, format: str) -> int | None:  # noqa: A002 - Spark's word
    """The rows of one part file as its format states them, or None for a format whose rows
    cannot be counted without parsing it as Spark would (CSV: quoted values span lines)."""
    if format == "parquet":
        import pyarrow.parquet as pq

        return int(pq.read_metadata(path).num_rows)
    if format == "orc":
        import pyarrow.orc as orc

        return int(orc.ORCFile(path).nrows)
    if format == "json":  # JSON lines: Spark writes one record per line, newlines escaped
        import pyarrow as pa

        lines, last = 0, b"\n"
        with pa.input_stream(path, compression="detect") as stream:
            while chunk := stream.read(1 << 20):
                lines += chunk.count(b"\n")
                last = chunk[-1:]
        return lines + (last != b"\n")
    return None


def check_staged_rows(
    folder: str, files: Sequence[StagedFile], format: str, rows: int  # noqa: A002
) -> None:
    """Refuse staged files whose rows (Parquet and ORC footers, JSON lines) do not add up to
    the ``rows`` the core counted while Spark wrote them: a proof would then claim a batch
    that readers see with duplicates (an extra attempt's file) or with rows lost."""
    counts = [_rows_in(os.path.join(folder, f.relpath), format) for f in files]
    if any(c is None for c in counts):
        return
    found = sum(c for c in counts if c is not None)
    if found != rows:
        raise StagedRowsMismatchError(
            f"Spark's writer staged {found} rows in {len(files)} file(s), but the core "
            f"counted {rows} as Spark wrote the batch: files of a task attempt that was not "
            "committed (speculation, a killed task) or files lost from the staging folder "
            f"{folder!r}. Nothing was published; the batch's replay writes it again."
        )


class _PassThrough:
    """Stands in for the sink's ``write`` so that executor plugins can wrap a staging task."""

    name = "staging"

    @hookimpl
    def write(self, batches: Iterator[Any]) -> Iterator[Any]:
        return batches


def _with_plugins(df: Any) -> Any:
    """``df`` with the run's executor plugins around every task, or ``df`` when there are none."""
    running = current()
    if running is None or not running.plugins:
        return df
    ctx, state, plugins = running.ctx, running.state, running.plugins

    def tasks(batches: Iterator[Any]) -> Iterator[Any]:
        from pyspark import TaskContext

        task = TaskContext.get()
        yield from plugin_manager(_PassThrough(), plugins).hook.write(
            ctx=ctx,
            state=state,
            partition_id=task.partitionId(),
            attempt=task.taskAttemptId(),
            batches=batches,
        )

    return df.mapInArrow(tasks, df.schema)
