"""An independent judge of a file-sink folder: the rows Spark's reader returns, without Spark.

What ``spark.read.schema(s).parquet(folder)`` (or ``.json``/``.csv``) does with a folder holding
``_spark_metadata``, re-implemented from Spark 4's source with no code of the sink (no
``eosink_files.log``/``reader``: the sink's reading of its own log cannot vouch for itself).
``CompactibleFileStreamLog.allFiles``: the latest id from the names, the compact interval from
the latest two compacts (one: ``deriveCompactInterval``; none: the setting), the latest compact
and the deltas after it; a missing or damaged file fails. ``MetadataLogFileIndex``: directories
dropped, ``action`` ignored (Spark 4 has no "delete"), a file listed twice read twice, size 0
(as logged) and ``_x``/``.x`` names skipped, an unpartitioned folder reads only its own files.
``PartitioningUtils``: ``name=value`` folders, values typed by the user schema. Where Spark
would silently read what no writer can mean (a "delete" entry, a file not of its logged size,
data files without a log) or null a value it cannot parse, this raises :class:`OracleError`.
"""

from __future__ import annotations

import base64
import binascii

import datetime as dt
import gzip
import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any
from urllib.parse import unquote, urlsplit
from zoneinfo import ZoneInfo

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

LOG_DIR = "_spark_metadata"
DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
_LOG_NAME = re.compile(r"[+-]?[0-9]+(\.compact)?")  # what Long.parseLong takes, ".compact" off
_LINES = re.compile(r"\r\n|\r|\n")  # Java's readLine terminators (not str.splitlines's)
_SAME_STORE = {"s3a": "s3", "s3n": "s3", "local": "file"}
_ENTRY = {"path": str, "size": int, "isDir": bool, "modificationTime": int,
          "blockReplication": int, "blockSize": int, "action": str}  # fmt: skip
_KINDS = {"string": ("is_string", "is_large_string"), "bool": ("is_boolean",),
          "int": ("is_integer",), "float": ("is_floating",), "decimal": ("is_decimal",),
          "date": ("is_date",), "timestamp": ("is_timestamp",)}  # fmt: skip
_JAVA_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)[fFdD]?")
_DECIMAL = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_DATE = re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})([ T].*)?")
_FORMAT_NAME = re.compile(r".*\.(parquet|json|csv)(\.gz)?")  # Spark's writers' name endings
_JAVA_BLANK = "".join(map(chr, range(33)))  # what Java's String.trim() trims
_JSON_FLOATS = {"NaN", "Infinity", "+Infinity", "-Infinity", "INF", "+INF", "-INF"}


class OracleError(Exception):
    """Spark's reader fails on this folder, or would read it in a way no writer can mean."""


def derive_compact_interval(default: int, latest_compact: int) -> int:
    """``CompactibleFileStreamLog.deriveCompactInterval``: a divisor of the one compact's id+1."""
    n = latest_compact + 1
    if n <= default or default >= n // 2:
        return n
    return next((i for i in range(default, n // 2 + 1) if n % i == 0), n)


def log_plan(names: Iterable[str], default_interval: int = 10) -> list[str]:
    """The log files Spark's reader reads, in order, given the names in ``_spark_metadata``."""
    ids, compacts = set(), []
    for name in filter(_LOG_NAME.fullmatch, names):
        ids.add(int(name.removesuffix(".compact")))
        compacts += [int(name[:-8])] if name.endswith(".compact") else []
    if not ids or max(ids) < 0:
        return []
    compacts.sort(reverse=True)
    interval = default_interval
    if len(compacts) > 1:
        interval = compacts[0] - compacts[1]
    elif compacts:
        interval = derive_compact_interval(default_interval, compacts[0])
    if interval <= 0:
        raise OracleError(f"{LOG_DIR}: compact interval {interval}; Spark asserts it is positive")
    latest = max(ids)
    start = max(0, (latest + 1) // interval * interval - 1)
    return [f"{i}.compact" if (i + 1) % interval == 0 else str(i) for i in range(start, latest + 1)]


def _log_entries(fs: Any, path: str, name: str) -> list[dict[str, Any]]:
    """The entries of one log file, or the failure Spark's deserializer meets."""
    with fs.open(path, "rb") as f:
        data = f.read()
    try:
        lines = _LINES.split(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise OracleError(f"{LOG_DIR}/{name} is not UTF-8 ({e}): Spark's reader fails") from None
    if lines[-1] == "":
        lines.pop()
    if not lines or lines[0] != "v1":
        raise OracleError(f"{LOG_DIR}/{name} does not start with 'v1': Spark's reader fails")
    entries = []
    for n, line in enumerate(lines[1:], 2):
        try:
            entry = json.loads(line)
        except ValueError:
            entry = None
        fields = entry.items() if isinstance(entry, dict) else ()
        if {k: type(v) for k, v in fields if k in _ENTRY} != _ENTRY:  # a SinkFileStatus
            raise OracleError(f"{LOG_DIR}/{name} line {n} is damaged: {line[:200]!r}")
        entries.append(entry)
    return entries


def _fs_path(fs: Any, uri: str) -> str:
    """The path in ``fs`` of a manifest URI (Hadoop's ``Path.toUri``: percent-encoded)."""
    parts = urlsplit(uri)
    scheme = parts.scheme.lower() or "file"
    scheme = _SAME_STORE.get(scheme, scheme)
    protocols = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
    if scheme not in {_SAME_STORE.get(p, p) for p in protocols} or parts.query or parts.fragment:
        raise OracleError(f"the log lists {uri!r}, not a path of the folder's store {protocols}")
    path = unquote(parts.path)
    return path if scheme == "file" else fs._strip_protocol(f"{scheme}://{parts.netloc}{path}")


def unescape_path_name(text: str) -> str:
    """Spark's ``ExternalCatalogUtils.unescapePathName``: ``%XX`` (hex) is the character XX."""
    return re.sub(r"%([+0-9A-Fa-f][0-9A-Fa-f])", lambda m: chr(int(m.group(1), 16)), text)


def _kind(typ: pa.DataType) -> str:
    tests = _KINDS.items()
    return next((k for k, ts in tests if any(getattr(pa.types, t)(typ) for t in ts)), str(typ))


def _from_text(text: str, typ: pa.DataType, tz: str, csv: bool = False) -> Any:
    """A partition folder's or a CSV field's text as Spark casts it to a user schema's type."""
    kind, trimmed = _kind(typ), text.strip("".join(map(chr, range(33))))  # Java's trim()
    if kind == "string":
        return text
    if kind == "int" and re.fullmatch(r"[+-]?\d+", text):
        return int(text)
    if kind == "float" and (_JAVA_DOUBLE.fullmatch(trimmed) or csv and text in ("Inf", "-Inf")):
        return float(trimmed.rstrip("fFdD"))  # Double.parseDouble; CSV's infinities
    if kind == "bool" and text.lower() in ("true", "false"):
        return text.lower() == "true"
    if kind == "decimal" and _DECIMAL.fullmatch(text):
        return Decimal(text)
    try:
        if kind == "date" and (m := _DATE.fullmatch(trimmed)):
            return dt.date(*map(int, m.groups()[:3]))
        if kind == "timestamp" and _DATE.fullmatch(trimmed):  # yyyy-MM-dd[ HH:mm:ss[.S]][zone]
            value = dt.datetime.fromisoformat(trimmed)  # no zone: the session's (NTZ: none)
            return value if value.tzinfo or typ.tz is None else value.replace(tzinfo=ZoneInfo(tz))
    except ValueError:  # a day or an hour out of range
        pass
    raise OracleError(f"Spark cannot read {text!r} as {typ}")


def _from_json(value: Any, typ: pa.DataType, tz: str) -> Any:
    """A JSON value as Spark's ``JacksonParser`` converts it to a user schema's type."""
    kind, number = _kind(typ), type(value) in (int, float, Decimal)
    if value is None or kind == "string" and isinstance(value, str):
        return value
    if kind == "string" and (number or isinstance(value, bool)):
        return str(value).lower() if isinstance(value, bool) else str(value)  # the token's text
    if kind == "int" and type(value) is int or kind == "bool" and isinstance(value, bool):
        return value
    if kind == "float" and (number or isinstance(value, str) and value in _JSON_FLOATS):
        return float(value.replace("INF", "Infinity") if isinstance(value, str) else value)
    if kind == "decimal" and number:
        return Decimal(value)
    if isinstance(value, str) and kind in ("decimal", "date", "timestamp"):
        return _from_text(value, typ, tz)
    if isinstance(value, str) and pa.types.is_binary(typ):
        try:  # Jackson's getBinaryValue: base64, as Spark's JSON writer writes binary
            return base64.b64decode(value, validate=True)
        except binascii.Error:
            pass
    raise OracleError(f"Spark cannot read the JSON value {value!r} as {typ}")


def _csv_fields(line: str, path: str) -> list[str]:
    """The fields of one line as Spark's CSV reader (univocity, default options: quote ``"``,
    escape ``\\``) parses them: an unquoted field is its text (a backslash in it is literal); a
    quoted one ends at a quote not escaped by a backslash, ``\\"`` in it is ``"`` and ``\\\\``
    is ``\\``. A quoted field left open (Spark's default reader cuts a value at a line break:
    ``multiLine`` reads it whole) or a quote not followed by the delimiter (RFC 4180's doubled
    quote, which Spark keeps as it is) is what no writer for Spark can mean: OracleError."""
    fields, i, n = [], 0, len(line)
    while True:
        if i < n and line[i] == '"':
            value, i = [], i + 1
            while i < n and line[i] != '"':
                if line[i] == "\\" and i + 1 < n and line[i + 1] in '"\\':
                    i += 1
                value.append(line[i])
                i += 1
            if i >= n:
                raise OracleError(f"{path}: a quoted value runs past a line break: {line!r}")
            if i + 1 < n and line[i + 1] != ",":
                raise OracleError(f"{path}: a quote inside a quoted value, not escaped: {line!r}")
            fields.append("".join(value))
            i += 1
        else:
            end = line.find(",", i)
            end = n if end < 0 else end
            fields.append(line[i:end])
            i = end
        if i >= n:
            return fields
        i += 1  # the delimiter


def _read_part(fs: Any, path: str, fields: list[pa.Field], fmt: str, header: bool, tz: str) -> list:
    """The columns ``fields`` of one part file, as Spark reads it with a user schema."""
    with fs.open(path, "rb") as f:
        data = f.read()
    if fmt == "parquet":  # columns by name (case-insensitive), a missing one is null
        table = pq.read_table(pa.BufferReader(data))
        by_name = {n.lower(): table.column(n) for n in table.column_names}
        out = []
        for field in fields:
            col = by_name.get(field.name.lower())
            if col is not None and _kind(col.type) != _kind(field.type):
                raise OracleError(f"{path}: {field.name} is {col.type}, not {field.type}")
            out.append(pa.nulls(len(table), field.type) if col is None else col.cast(field.type))
        return out
    text = (gzip.decompress(data) if path.endswith(".gz") else data).decode("utf-8")
    if fmt == "json":  # one object per line, blank lines skipped, a missing key is null
        rows = [json.loads(ln, parse_float=Decimal) for ln in _LINES.split(text) if ln.strip()]
        if not all(isinstance(r, dict) for r in rows):
            raise OracleError(f"{path}: a line is not a JSON object")
        cols = [[_from_json(r.get(f.name), f.type, tz) for r in rows] for f in fields]
    elif fmt == "csv":  # fields by position; "" (quoted or not) is null
        lines = [ln for ln in _LINES.split(text) if ln.strip(_JAVA_BLANK)]  # blank lines skipped
        rows = [_csv_fields(ln, path) for ln in lines[int(header) :]]  # the first: the header
        if any(len(row) != len(fields) for row in rows):
            raise OracleError(f"{path}: a line has not {len(fields)} fields: Spark pads or cuts it")
        cols = [
            [_from_text(r[i], f.type, tz, True) if r[i] else None for r in rows]
            for i, f in enumerate(fields)
        ]
    else:
        raise OracleError(f"unknown format {fmt!r}")
    return [pa.array(col, f.type) for col, f in zip(cols, fields)]


def format_named(path: str) -> str | None:
    """The format a data file's name gives (``….snappy.parquet``, ``….json.gz``), if any."""
    m = _FORMAT_NAME.fullmatch(path.rsplit("/", 1)[-1])
    return m.group(1) if m else None


def folder_format(paths: Sequence[str]) -> str:
    """The one format of the files the log lists, as their names give it: the format a user
    reading the folder names (Spark reads a folder in one format). Files of two formats, or
    of none: :class:`OracleError` (Spark would read some of them as garbage or fail)."""
    formats = {p: format_named(p) for p in paths}
    found = set(formats.values())
    if len(found) > 1 or None in found:
        shown = {f: next(p for p, g in formats.items() if g == f) for f in found}
        raise OracleError(f"the log lists files of {len(found)} formats: {shown}")
    return found.pop() if found else "parquet"


def live_files(
    fs: Any, root: str, partition_by: Sequence[str] = (), compact_interval: int = 10
) -> list[tuple[str, dict[str, str]]]:
    """The files Spark's reader reads from the folder ``root`` of ``fs``, in log order:
    ``(path, {partition column: its folder's raw value})``."""
    if not fs.exists(f"{root}/{LOG_DIR}"):  # Spark then reads every data file in the folder
        data = [p for p in fs.find(root) if not re.search(r"(^|/)[_.]", p[len(root) + 1 :])]
        if data:
            raise OracleError(f"{root}: no {LOG_DIR}, so Spark reads every file: {data[:3]}")
        return []
    names = {p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(f"{root}/{LOG_DIR}", detail=False)}
    live = []
    for name in log_plan(names, compact_interval):
        if name not in names:
            raise OracleError(f"{LOG_DIR}/{name} is missing, Spark's reader fails: {sorted(names)}")
        for entry in _log_entries(fs, f"{root}/{LOG_DIR}/{name}", name):
            if entry["isDir"]:
                continue
            if entry["action"] != "add":
                raise OracleError(f"{LOG_DIR}/{name}: {entry['action']!r}; Spark 4 reads it anyway")
            path = _fs_path(fs, entry["path"])
            base = path.rsplit("/", 1)[-1]  # PartitioningAwareFileIndex.isNonEmptyFile:
            if entry["size"] <= 0 or base[:1] == "." or base[:1] == "_" and "=" not in base:
                continue
            folders = path[len(root) + 1 :].split("/")[:-1] if path.startswith(root + "/") else None
            if not partition_by and folders != []:
                if folders and any("=" in f for f in folders):
                    raise OracleError(f"{path}: a Hive folder, but no partition columns given")
                continue  # unpartitioned: Spark reads only the folder's own files
            specs = [f.partition("=") for f in folders or []]
            keys = [unescape_path_name(c) for c, _, _ in specs]
            if folders is None or keys != list(partition_by) or not all(v for _, _, v in specs):
                raise OracleError(f"{path}: not in Hive folders {partition_by} under {root}")
            if not fs.exists(path) or fs.size(path) != entry["size"]:
                raise OracleError(f"{path}: missing or not of the logged size {entry['size']}")
            live.append((path, {c: v for c, (_, _, v) in zip(partition_by, specs)}))
    return live


def read_committed(
    url: str,
    schema: pa.Schema,
    partition_by: Sequence[str] = (),
    *,
    format: str | None = "parquet",
    csv_header: bool = True,
    compact_interval: int = 10,
    session_tz: str = "UTC",
    storage_options: dict[str, Any] | None = None,
) -> tuple[pa.Table, list[str]]:
    """The rows Spark's reader returns for the folder at ``url`` (in ``schema``'s column order),
    and the paths of the files it reads (a file listed twice is read twice).

    ``schema``: the source's, partition columns included; ``format``: the reader's, or None
    for the one the listed files' names give (:func:`folder_format`); ``compact_interval``: the
    readers'
    ``spark.sql.streaming.fileSink.log.compactInterval``; ``session_tz``: Spark's session time
    zone, for timestamps written without one.
    """
    fs, root = fsspec.core.url_to_fs(url, **(storage_options or {}))
    live = live_files(fs, root.rstrip("/"), partition_by, compact_interval)
    fields = [f for f in schema if f.name not in partition_by]
    format = format or folder_format([path for path, _ in live])
    tables = []
    for path, folders in live:
        columns = _read_part(fs, path, fields, format, csv_header, session_tz)
        read = dict(zip([f.name for f in fields], columns))
        rows = len(read[fields[0].name]) if fields else 0
        for column, raw in folders.items():
            typ = schema.field(column).type
            text = unescape_path_name(raw) if _kind(typ) in ("string", "timestamp") else raw
            value = None if raw == DEFAULT_PARTITION else _from_text(text, typ, session_tz)
            read[column] = pa.array([value] * rows, typ)
        tables.append(pa.Table.from_arrays([read[f.name] for f in schema], schema=schema))
    table = pa.concat_tables(tables) if tables else schema.empty_table()
    return table, [path for path, _ in live]


class _NaN:
    """Stands for every float NaN in normalized rows, so that rows holding NaN compare equal."""

    def __repr__(self) -> str:
        return "NaN"


NAN = _NaN()


def normalize(row: Sequence[Any], empty_is_null: Iterable[int] = ()) -> tuple[Any, ...]:
    """A row made comparable: NaN -> :data:`NAN`; "" -> None at the ``empty_is_null`` indexes
    (Spark reads an empty partition value back as null); aware datetimes -> naive UTC."""
    nulls, out = set(empty_is_null), []
    for i, v in enumerate(row):
        if isinstance(v, float) and math.isnan(v):
            v = NAN
        elif isinstance(v, dt.datetime) and v.tzinfo is not None:
            v = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
        out.append(None if v == "" and i in nulls else v)
    return tuple(out)


def rows_of(table: pa.Table, empty_is_null: Iterable[str] = ()) -> Counter[tuple[Any, ...]]:
    """The table's rows as a Counter of normalized tuples (in its column order)."""
    idx = [table.schema.get_field_index(c) for c in empty_is_null]
    return Counter(normalize(r, idx) for r in zip(*(c.to_pylist() for c in table.columns)))


def assert_exactly_once(
    table: pa.Table, expected: Iterable[Sequence[Any]], empty_is_null: Sequence[str] = ()
) -> None:
    """``table`` holds exactly the ``expected`` rows (tuples in its column order; a Counter gives
    each row's count): none lost, none read twice, nothing else."""
    idx = [table.schema.get_field_index(c) for c in empty_is_null]
    want: Counter[tuple[Any, ...]] = Counter()
    for row, count in (expected if isinstance(expected, Counter) else Counter(expected)).items():
        want[normalize(row, idx)] += count
    got = rows_of(table, empty_is_null)
    missing, extra = want - got, got - want
    if missing or extra:
        raise AssertionError(
            f"read {sum(got.values())} rows, expected {sum(want.values())}: {len(missing)} rows "
            f"missing (e.g. {list(missing.items())[:3]}), {len(extra)} extra or repeated "
            f"(e.g. {list(extra.items())[:3]})"
        )
