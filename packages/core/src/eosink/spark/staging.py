"""``stage_dataframe``: Spark's own writer stages a DataFrame batch into a folder.

Handing every row from the JVM to Python as Arrow costs more than a Spark writer spends on the
whole write, so a sink whose store Spark can write implements ``write_dataframe`` with this
helper: Spark writes the batch (format, options, ``partitionBy``) into a staging folder of the
attempt, the core counts the rows on the way (an ``Observation``; that count becomes the
proof's), and the sink gets the part files with their sizes to move into place: the files
Spark's job commit left (never ``_temporary/``, where attempts that were not committed write),
whose rows (footers, JSON lines, CSV records) must add up to that count
(:func:`check_staged_rows`). The folder is
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
        check_staged_rows(folder, files, format, rows, options)
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


def _rows_in(
    path: str, format: str, options: Mapping[str, str]  # noqa: A002 - Spark's word
) -> int | None:
    """The rows of one part file as its format states them (Parquet and ORC footers, JSON
    lines, CSV records), or None for a format this cannot count."""
    if format == "parquet":
        import pyarrow.parquet as pq

        return int(pq.read_metadata(path).num_rows)
    if format == "orc":
        import pyarrow.orc as orc

        return int(orc.ORCFile(path).nrows)
    if format == "json":  # JSON lines: Spark writes one record per line, newlines escaped
        return _records(path, CsvDialect(quote=b"\x00", escape=b"\x00", line_sep=b"\n"))
    if format == "csv":
        dialect = CsvDialect.of(options)
        if dialect is None:
            return None
        records = _records(path, dialect)
        return max(records - 1, 0) if dialect.header else records
    return None


@attrs.frozen
class CsvDialect:
    """What decides where a record of Spark's CSV writer ends: a value holding the line
    separator, the field separator or the quote is quoted, and inside quotes the escape
    character escapes the next one (a doubled quote when escape and quote are the same)."""

    quote: bytes = b'"'
    escape: bytes = b"\\"
    line_sep: bytes = b"\n"
    header: bool = False

    @classmethod
    def of(cls, options: Mapping[str, str]) -> CsvDialect | None:
        """The dialect of Spark's CSV options, or None where records cannot be found by bytes
        (an encoding other than UTF-8, a line separator of more than one character)."""
        lowered = {k.lower(): v for k, v in options.items()}
        encoding = lowered.get("encoding", lowered.get("charset", "utf-8"))
        if encoding.lower().replace("-", "") not in ("utf8", "ascii", "usascii"):
            return None
        line_sep = lowered.get("linesep", "\n").encode()
        quote, escape = lowered.get("quote", '"'), lowered.get("escape", "\\")
        if len(line_sep) != 1 or len(quote.encode()) > 1 or len(escape.encode()) > 1:
            return None
        return cls(
            quote=quote.encode() or b"\x00",  # "" turns quoting off
            escape=escape.encode() or b"\x00",
            line_sep=line_sep,
            header=lowered.get("header", "false").lower() == "true",
        )


def _records(path: str, dialect: CsvDialect) -> int:
    """The records of one (possibly compressed) text file: line separators outside quotes, and
    a last record without one. Chunks without a quote are counted at the speed of bytes.count."""
    import re

    import pyarrow as pa

    quote, escape, sep = dialect.quote, dialect.escape, dialect.line_sep
    special = re.compile(b"[" + re.escape(quote + escape + sep) + b"]")
    records, in_quote, skip_first, last = 0, False, False, sep
    with pa.input_stream(path, compression="detect") as stream:
        while chunk := stream.read(1 << 20):
            last = chunk[-1:]
            pos = 1 if skip_first else 0
            skip_first = False
            if not in_quote and quote not in chunk[pos:]:
                records += chunk.count(sep, pos)
                continue
            while match := special.search(chunk, pos):
                char, pos = match.group(), match.end()
                if in_quote:
                    if char == escape and escape != quote:
                        skip_first = pos == len(chunk)  # the escaped byte opens the next chunk
                        pos += 1
                    elif char == quote:
                        in_quote = False
                elif char == sep:
                    records += 1
                elif char == quote:
                    in_quote = True
    return records + (last != sep)


def check_staged_rows(
    folder: str,
    files: Sequence[StagedFile],
    format: str,  # noqa: A002
    rows: int,
    options: Mapping[str, str] | None = None,
) -> None:
    """Refuse staged files whose rows (Parquet and ORC footers, JSON lines, CSV records by the
    writer's ``options``) do not add up to the ``rows`` the core counted while Spark wrote
    them: a proof would then claim a batch that readers see with duplicates (an extra
    attempt's file) or with rows lost."""
    counts = [_rows_in(os.path.join(folder, f.relpath), format, options or {}) for f in files]
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
