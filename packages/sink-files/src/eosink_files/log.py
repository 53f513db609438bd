"""The manifest log, ``_spark_metadata``, in Spark's own format, read the way Spark reads it.

A log file is named by its log id: ``<id>`` (a delta: the files one commit added) or
``<id>.compact`` (every live file up to that commit). Its first line is ``v1``; every other
line is one JSON object, Spark's ``SinkFileStatus``::

    {"path":"file:///out/part-....parquet","size":530,"isDir":false,"modificationTime":...,
     "blockReplication":1,"blockSize":33554432,"action":"add"}

eosink adds **proof lines** at the top of each file: entries that Spark's reader drops (they
are directories, ``"isDir":true``, pointing at the log folder; Spark's parser ignores the
extra ``"eosink"`` field) and that carry the proof of the commit (writer id, batch id, query
id, checkpoint, rows, fingerprint) plus the attempt that wrote it. A compact carries the latest
proofs of every writer forward, so the skip evidence survives whatever is deleted before it.

A file with proof lines counts only when it ends with its **closing line** (an entry of the
same kind naming the file's log id): a torn write (``single_writer`` mode, where the
filesystem cannot publish atomically) that stops on a line boundary would otherwise leave a
proof over part of the batch's files. Files without proof lines are Spark's own (or eosink's
empty fillers, ``v1`` alone) and are read as Spark reads them.

Log ids count commits (0, 1, 2, ...): several writers (stream queries and batch jobs, each
with its own writer id) may share a folder, and each commit takes the next id with an
atomic create-if-absent. The writer's own batch id (micro-batch id or batch-job version) is in
its proof.

Spark's reader (``FileStreamSinkLog`` in ``MetadataLogFileIndex``) finds the latest id from the
file names, derives the compact interval from the ``.compact`` files present (the distance of
the latest two; with a single one, the divisor rule of ``deriveCompactInterval``; with none,
its setting ``spark.sql.streaming.fileSink.log.compactInterval``), and reads the latest compact
plus the deltas after it, failing if one is missing. :func:`reader_plan` mirrors that exactly,
so the writer can check every file it publishes keeps the log readable, and non-Spark
readers read exactly what Spark reads.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

import attrs

from eosink.plugin import SinkError
from eosink_files.proof import PROOF_PREFIX, ProofEntry

LOG_DIR = "_spark_metadata"
VERSION_LINE = "v1"
COMPACT = ".compact"
NAME_RE = re.compile(r"^(\d+)(\.compact)?$")


class ManifestError(SinkError):
    """The manifest log cannot be read as Spark would read it."""


def log_name(log_id: int, compact: bool) -> str:
    return f"{log_id}{COMPACT if compact else ''}"


def log_files(names: Iterable[str]) -> dict[int, bool]:
    """Log id -> is-compact, from a listing of ``_spark_metadata`` (other names are ignored)."""
    out: dict[int, bool] = {}
    for name in names:
        m = NAME_RE.match(name)
        if m:
            log_id = int(m.group(1))
            out[log_id] = out.get(log_id, False) or bool(m.group(2))
    return out


def derive_compact_interval(default: int, latest_compact: int) -> int:
    """Spark's ``CompactibleFileStreamLog.deriveCompactInterval``."""
    n = latest_compact + 1
    if n <= default:
        return n
    if default < n // 2:
        for i in range(default, n // 2 + 1):
            if n % i == 0:
                return i
        return n
    return n


def reader_interval(files: dict[int, bool], default: int) -> int:
    """The compact interval Spark's reader uses for this listing."""
    compacts = sorted((i for i, c in files.items() if c), reverse=True)
    if len(compacts) >= 2:
        return compacts[0] - compacts[1]
    if len(compacts) == 1:
        return derive_compact_interval(default, compacts[0])
    return default


def reader_plan(files: dict[int, bool], default: int) -> list[tuple[int, bool]]:
    """The files Spark's reader reads for this listing: ``[(log_id, compact), ...]``.

    Raises :class:`ManifestError` naming the missing file when Spark's reader would fail.
    """
    if not files:
        return []
    latest = max(files)
    interval = reader_interval(files, default)
    start = max(0, (latest + 1) // interval * interval - 1)
    plan = []
    for log_id in range(start, latest + 1):
        compact = (log_id + 1) % interval == 0
        if files.get(log_id) is None or files[log_id] != compact:
            raise ManifestError(
                f"{LOG_DIR}/{log_name(log_id, compact)} is missing (latest entry {latest}, compact "
                f"interval {interval}): Spark's reader cannot read this log. If the folder was "
                "written with another spark.sql.streaming.fileSink.log.compactInterval, set the "
                "sink's compact_interval option to it; otherwise restore the missing file."
            )
        plan.append((log_id, compact))
    return plan


def plan_is_valid(files: dict[int, bool], default: int) -> bool:
    try:
        reader_plan(files, default)
    except ManifestError:
        return False
    return True


# -- entries ---------------------------------------------------------------------------------
@attrs.frozen
class FileEntry:
    """A data file as listed in the log."""

    path: str  # URI, as Spark reads it
    size: int
    modification_time: int

    def to_line(self) -> str:
        return json.dumps(
            {
                "path": self.path,
                "size": self.size,
                "isDir": False,
                "modificationTime": self.modification_time,
                "blockReplication": 1,
                "blockSize": 33554432,
                "action": "add",
            },
            separators=(",", ":"),
        )


@attrs.define
class LogFile:
    """One parsed log file: its proofs, and (when fully read) its file entries."""

    log_id: int
    compact: bool
    proofs: list[ProofEntry]
    files: list[dict[str, Any]] | None = None  # None: only the proof header was read
    body: bytes = b""  # the file-entry lines, raw (a compaction copies them as they are)
    # of a compact read header-only: where its file-entry lines lie in the file
    body_start: int = 0
    body_end: int = 0
    size: int | None = None  # bytes in the file, as read or published (None: not known)


def _damaged(name: str, what: str) -> ManifestError:
    return ManifestError(
        f"{LOG_DIR}/{name} is damaged: {what}. eosink-files publishes log files atomically, so "
        "it was changed or truncated outside eosink (or by a crashed writer without atomic "
        "publication). Restore the file from a backup; if it is the latest entry and was never "
        "read, delete it and restart the query from its checkpoint, which replays the batch."
    )


def _closing_id(line: bytes) -> int | None:
    """The log id a closing line names, or None if ``line`` is not a closing line."""
    if not line.startswith(PROOF_PREFIX.encode()):
        return None
    try:
        end = json.loads(line)["eosink"].get("end")
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return end if isinstance(end, int) else None


def split_closing(body: bytes) -> tuple[bytes, int | None]:
    """``body`` without its closing line, and the log id that line names (None: no such line)."""
    trimmed = body.rstrip(b"\n")
    cut = trimmed.rfind(b"\n") + 1
    end = _closing_id(trimmed[cut:])
    return (trimmed[:cut], end) if end is not None else (body, None)


def check_closed(name: str, log_id: int, has_proofs: bool, closing: int | None) -> None:
    """Refuse a file with proofs that does not end with its own closing line: it is torn."""
    if has_proofs and closing != log_id:
        raise _damaged(
            name,
            "it does not end with its closing line, so it is torn (a write that stopped "
            "part-way, possible only where the filesystem cannot publish atomically)",
        )


def check_size(name: str, size: int, expected: int) -> None:
    """Refuse a log file whose size changed since it was read or published: they never change."""
    if size != expected:
        raise _damaged(name, f"it has {size} bytes, not the {expected} it had when first read")


def check_tail(name: str, log_id: int, has_proofs: bool, tail: bytes, whole: bool) -> bytes:
    """Refuse a log file whose last bytes show it was cut; return ``tail`` without its closing
    line.

    ``tail``: the file's last bytes (all of it when ``whole``). A file with proofs ends with
    its closing line; any other (Spark's own, an empty filler) with a complete line, ``v1`` or
    a file entry, as Spark's reader needs.
    """
    before, closing = split_closing(tail)
    if has_proofs:
        check_closed(name, log_id, True, closing)
        return before
    trimmed = tail.rstrip(b"\n")
    cut = trimmed.rfind(b"\n")
    if cut < 0 and not whole:
        return before  # one line longer than the tail: nothing to judge by
    last = trimmed[cut + 1 :]
    if last.strip() == VERSION_LINE.encode() or closing is not None:
        return before
    try:
        entry = json.loads(last)
        if not isinstance(entry, dict) or "path" not in entry:
            raise ValueError("not a file entry")
    except ValueError as exc:
        raise _damaged(name, f"its last line is not a complete JSON file entry ({exc})") from None
    return before


def parse(data: bytes, log_id: int, compact: bool, *, header_only: bool = False) -> LogFile:
    """Parse one log file as Spark does; ``header_only`` stops after the proof lines.

    ``data`` may be just the beginning of the file when ``header_only`` (see
    :func:`header_end`); the caller then checks the closing line at its end. The file-entry
    lines are kept as raw bytes in ``body`` (without the closing line), so a compaction copies
    them without decoding or re-serializing.
    """
    name = log_name(log_id, compact)
    if not data:
        raise _damaged(name, "the file is empty (Spark fails on it with 'Incomplete log file')")
    first, _, rest = data.partition(b"\n")
    if first.strip() != VERSION_LINE.encode():
        shown = first[:40].decode("utf-8", "replace")
        raise _damaged(name, f"the first line is {shown!r}, not the log version {VERSION_LINE!r}")
    out = LogFile(log_id, compact, [])
    pos = 0
    prefix = PROOF_PREFIX.encode()
    while pos < len(rest) and rest.startswith(prefix, pos):
        end = rest.find(b"\n", pos)
        if end < 0:
            if header_only and len(rest) - pos > 1 << 20:
                raise _damaged(name, "a proof line does not end")
            end = len(rest)
        line = rest[pos:end]
        try:
            meta = json.loads(line)["eosink"]
            if "end" in meta:  # the closing line of a file without file entries
                break
            out.proofs.append(ProofEntry.from_meta(meta))
        except (ValueError, KeyError, TypeError) as exc:
            raise _damaged(name, f"a proof line cannot be read ({exc})") from None
        pos = end + 1
    out.body = rest[pos:]
    if header_only:
        return out
    out.body, closing = split_closing(out.body)
    check_closed(name, log_id, bool(out.proofs), closing)
    files = []
    for number, line in enumerate(out.body.split(b"\n"), start=2 + len(out.proofs)):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            if not isinstance(entry, dict) or "path" not in entry or "size" not in entry:
                raise ValueError("not a file entry")
        except ValueError as exc:
            raise _damaged(
                name, f"line {number} is not a complete JSON file entry ({exc})"
            ) from None
        if not entry.get("isDir", False) and entry.get("action", "add") == "add":
            files.append(entry)
    out.files = files
    return out


def header_end(data: bytes) -> int | None:
    """Where the proof header of a log file's beginning ends, or None if more is needed."""
    first = data.find(b"\n")
    if first < 0:
        return None
    pos = first + 1
    prefix = PROOF_PREFIX.encode()
    while True:
        if len(data) - pos < len(prefix):
            return None
        if not data.startswith(prefix, pos):
            return pos
        end = data.find(b"\n", pos)
        if end < 0:
            return None
        pos = end + 1


def render(
    proofs: Iterable[str], files: Iterable[str], body: bytes = b"", closing: str = ""
) -> bytes:
    """A log file's bytes: the version line, proof lines, file-entry lines, the closing line."""
    head = "\n".join([VERSION_LINE, *proofs]).encode("utf-8")
    parts = [head]
    body = body.strip(b"\n")
    if body:
        parts.append(body)
    tail = "\n".join([*files, closing] if closing else files)
    if tail:
        parts.append(tail.encode("utf-8"))
    return b"\n".join(parts)
