"""Part files from Arrow record batches: Parquet, JSON lines, CSV; Hive partition folders.

Arrow batches arrive small (Spark hands 10,000 rows at a time); they are buffered into row
groups of ``row_group_size`` rows and written straight from Arrow (no pandas, no row copies).
A part file is closed and the next one started once it reaches ``target_file_size`` bytes.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
from typing import Any

import attrs
import pyarrow as pa

from eosink.encodings import DictionaryChoice
from eosink.partitions import group_by_text, java_number_text
from eosink_files.options import FilesOptions
from eosink_files.store import Store

#: Spark's ``ExternalCatalogUtils.escapePathName``: these characters become ``%XX``; and NUL,
#: which Spark leaves as it is (no path can hold it: its own writer fails) and its reader's
#: unescaping of ``%00`` reads back.
_ESCAPED = set("\"#%'*/:=?\\\x7f{[]^") | {chr(c) for c in range(32)}
DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"

PARQUET_SUFFIX = {"snappy": ".snappy", "gzip": ".gz", "zstd": ".zstd", "lz4": ".lz4raw", "none": ""}


def escape_path_name(text: str) -> str:
    """Escape a partition column name or value as Spark does, so no value can leave its folder.

    ``/`` becomes ``%2F``; ``..`` stays ``..`` but only ever appears after ``name=``, so it can
    never be a folder of its own. Spark's reader unescapes the folder names back to the values.
    """
    return "".join(f"%{ord(ch):02X}" if ch in _ESCAPED else ch for ch in text)


def partition_text(value: Any, type_: pa.DataType) -> str:
    """The folder text Spark gives a partition value (before escaping): ``cast(v as string)``.

    Spark's writer names a folder ``name=<text>`` and its reader parses the text back, so the
    text must be the one Spark writes (a folder of this sink and one of Spark's own writer for
    the same value are the same folder): null, ``""`` and the default name itself share
    ``__HIVE_DEFAULT_PARTITION__``; floats print as Java does (``1.0E20``, ``NaN``, ``-0.0``);
    decimals in plain digits at the column's scale; timestamps as wall time in the column's
    zone (Spark hands Arrow batches in its session zone, which its reader assumes) with the
    fraction's trailing zeros dropped.
    """
    if value is None or value == "" or value == DEFAULT_PARTITION:
        return DEFAULT_PARTITION
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_number_text(value, single=pa.types.is_floating(type_) and type_.bit_width < 64)
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, dt.datetime):
        return _without_trailing_zeros(value.replace(tzinfo=None).isoformat(sep=" "))
    if isinstance(value, (dt.date, dt.time)):
        return _without_trailing_zeros(value.isoformat())
    return str(value)


def _without_trailing_zeros(text: str) -> str:
    """``01:02:03.120000`` -> ``01:02:03.12``, ``01:02:03.000000`` -> ``01:02:03``."""
    return text.rstrip("0").rstrip(".") if "." in text else text


def unsupported_partition_type(type_: pa.DataType) -> str | None:
    """Why Spark cannot read a column of ``type_`` back from partition folders (and the fix),
    or ``None`` when it can."""
    if pa.types.is_dictionary(type_):
        return unsupported_partition_type(type_.value_type)
    if pa.types.is_nested(type_):
        return "Spark cannot partition by a nested type: partition by a simple column"
    if pa.types.is_null(type_):
        return (
            "every value is null and Spark refuses a VOID partition column: cast it to the type "
            "it should have in the query"
        )
    if (
        pa.types.is_binary(type_)
        or pa.types.is_large_binary(type_)
        or pa.types.is_binary_view(type_)
        or pa.types.is_fixed_size_binary(type_)
    ):
        return (
            "a folder name holds text, so Spark reads binary values back as strings (its own "
            "writer fails on bytes that are not UTF-8): cast it to a string in the query "
            "(e.g. hex(col) or base64(col))"
        )
    if pa.types.is_duration(type_) or pa.types.is_interval(type_):
        return (
            "Spark's folder holds the interval's text (INTERVAL '1' DAY) and its reader reads "
            "it back as a string: cast it to a string or a number in the query (e.g. seconds)"
        )
    return None


def partition_folder(columns: tuple[str, ...], texts: tuple[str, ...]) -> str:
    """The Hive folder of a partition (``day=2024-01-01/...``) from its values' texts."""
    return "/".join(f"{escape_path_name(c)}={escape_path_name(t)}" for c, t in zip(columns, texts))


def file_suffix(options: FilesOptions) -> str:
    codec = options.codec
    if options.format == "parquet":
        return PARQUET_SUFFIX[codec] + ".parquet"
    return f".{options.format}" + (".gz" if codec == "gzip" else "")


@attrs.frozen
class WrittenFile:
    relpath: str
    size: int
    modification_time: int
    rows: int


# -- one part file ---------------------------------------------------------------------------
class PartFile:
    """One open part file of some format."""

    def __init__(
        self,
        store: Store,
        relpath: str,
        schema: pa.Schema,
        options: FilesOptions,
        first: pa.Table,
        dictionaries: DictionaryChoice,
    ):
        self.store, self.relpath, self.schema, self.options = store, relpath, schema, options
        self.dictionaries = dictionaries
        self.rows = 0
        self.stream = store.open_write(relpath)
        self._out: Any = self.stream
        if options.format != "parquet" and options.codec == "gzip":
            self._out = pa.CompressedOutputStream(self.stream, "gzip")
        self._open(first)

    def _open(self, first: pa.Table) -> None:
        fmt = self.options.format
        if fmt == "parquet":
            import pyarrow.parquet as pq

            self.writer = pq.ParquetWriter(
                self._out,
                self.schema,
                compression=self.options.codec,
                coerce_timestamps="us",
                allow_truncated_timestamps=True,
                use_dictionary=self.dictionaries(first),
            )
        elif fmt == "csv":
            self.writer = None
            if self.options.csv_header:
                self._out.write(csv_header(self.schema))
        else:
            self.writer = None

    def write(self, table: pa.Table) -> None:
        self.rows += table.num_rows
        fmt = self.options.format
        if fmt == "parquet":
            self.writer.write_table(table, row_group_size=max(table.num_rows, 1))
        elif fmt == "csv":
            for chunk in csv_lines(table):
                self._out.write(chunk)
        else:
            self._out.write(json_lines(table))

    def tell(self) -> int:
        try:
            return self.stream.tell()
        except Exception:  # noqa: BLE001 - a stream without tell: never roll
            return 0

    def close(self) -> WrittenFile:
        if self.writer is not None:
            self.writer.close()
        if self._out is not self.stream:
            self._out.close()
        if not self.stream.closed:
            self.stream.close()
        size, mtime = self.store.stat(self.relpath)
        return WrittenFile(self.relpath, size, mtime, self.rows)


def _spark_floats(typ: pa.DataType) -> bool:
    return pa.types.is_float32(typ) or pa.types.is_float64(typ)


def csv_schema(schema: pa.Schema) -> pa.Schema:
    """The schema of :func:`csv_table`'s tables: float columns become text."""
    return pa.schema(
        [f.with_type(pa.string()) if _spark_floats(f.type) else f for f in schema],
        metadata=schema.metadata,
    )


_JAVA_FLOATS = (("^nan$", "NaN"), ("^inf$", "Infinity"), ("^-inf$", "-Infinity"))


def csv_table(table: pa.Table) -> pa.Table:
    """Floats as text Spark's CSV reader reads back: pyarrow writes ``nan``, ``inf`` and
    ``-inf``, which Spark reads as null; Java's ``NaN``, ``Infinity`` and ``-Infinity`` (what
    Spark's own CSV writer writes) it reads as the values. Other numbers keep pyarrow's text."""
    if not any(_spark_floats(t) for t in table.schema.types):
        return table
    import pyarrow.compute as pc

    columns = []
    for column, typ in zip(table.columns, table.schema.types):
        if _spark_floats(typ):
            column = pc.cast(column, pa.string())
            for pattern, java in _JAVA_FLOATS:
                column = pc.replace_substring_regex(column, pattern, java)
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=csv_schema(table.schema))


#: A value Spark's CSV writer quotes: it holds the delimiter, a quote or a line break, or is
#: empty (``""``, told from null, which is nothing). Beyond Spark's writer, a value holding a
#: backslash, or starting or ending with a character up to ``' '`` (see :func:`csv_fields`).
_CSV_QUOTED = r'[,"\r\n\\]|^$|^[\x00-\x20]|[\x00-\x20]$'


def _text(value: str) -> pa.Scalar:
    """A text scalar of the type of :func:`csv_fields`'s texts (large: a file's worth of text
    may pass 2 GiB, a ``string`` array's limit)."""
    return pa.scalar(value, pa.large_string())


def _is_text(typ: pa.DataType) -> bool:
    if pa.types.is_dictionary(typ):
        return _is_text(typ.value_type)
    return pa.types.is_string(typ) or pa.types.is_large_string(typ) or pa.types.is_string_view(typ)


def csv_fields(column: pa.ChunkedArray | pa.Array, first: bool) -> pa.ChunkedArray | pa.Array:
    """The text of each value of a text column as Spark's CSV writer writes it (default options:
    quote ``"``, escape ``\\``, escapeQuotes, no quoteAll); null is an empty field.

    Spark's reader does not take RFC 4180's doubled quote (``"a""b"`` reads as ``"a""b"``) but
    the backslash escape its writer writes, so the text is the writer's (univocity's
    ``CsvWriter``): a value holding ``,``, ``"``, ``\\n`` or ``\\r``, an empty one, and one
    starting with ``#`` in the first field (univocity's comment character) are quoted, with
    ``\\`` and ``"`` inside escaped by a backslash. Two rules are not Spark's. Spark's writer
    leaves a backslash in a value it does not quote as it is (its reader takes it literally
    there); the sink quotes such a value, so that every backslash in its files is an escaped
    one, which Spark's reader reads the same and readers that take the backslash for an escape
    everywhere (pyarrow's, :mod:`eosink_files.reader`) read right. And Spark's writer trims
    every character up to ``' '`` off both ends of a value (``ignoreLeading/TrailingWhiteSpace``,
    true on write), so ``" a "`` would read back as ``"a"`` and ``" "`` as null; the sink quotes
    such a value instead, which Spark's reader reads back unchanged.
    """
    import pyarrow.compute as pc

    column = pc.cast(column, pa.large_string())
    quoted = pc.match_substring_regex(column, _CSV_QUOTED)
    if first:
        quoted = pc.or_(quoted, pc.starts_with(column, "#"))
    if not pc.any(quoted).as_py():  # the common case: every value as it is
        return pc.fill_null(column, _text(""))
    escaped = pc.replace_substring_regex(column, r'(["\\])', r"\\\1")
    quote, empty = _text('"'), _text("")
    text = pc.if_else(quoted, pc.binary_join_element_wise(quote, escaped, quote, empty), column)
    return pc.fill_null(text, empty)


def _csv_row_texts(table: pa.Table) -> pa.ChunkedArray | pa.Array:
    """Each row's line: its fields joined by ``,`` and a ``\\n`` (after the last field, which
    copies one column rather than every line once more), floats as Java prints them
    (:func:`csv_table`), other values as pyarrow prints them (its CSV writer's text: a cast to
    string)."""
    import pyarrow.compute as pc

    table = csv_table(table)
    fields = []
    for i, (column, typ) in enumerate(zip(table.columns, table.schema.types)):
        if _is_text(typ):
            text = csv_fields(column, first=i == 0)
        else:
            text = pc.fill_null(pc.cast(column, pa.large_string()), "")
        if table.num_columns == 1:
            # Spark's writer writes a row of one null as an empty line, which its reader skips:
            # the row would be lost. "" reads back as null and keeps the row.
            text = pc.if_else(pc.is_null(column), _text('""'), text)
        fields.append(text)
    fields[-1] = pc.binary_join_element_wise(fields[-1], _text(""), _text("\n"))
    return pc.binary_join_element_wise(*fields, _text(","))


def csv_lines(table: pa.Table) -> list[pa.Buffer]:
    """The CSV text of ``table``'s rows, one line each (``\\n`` after each, as Spark writes on
    Linux), as buffers to write in order: Arrow's text, never copied row by row."""
    if table.num_rows == 0 or table.num_columns == 0:
        return []
    rows = _csv_row_texts(table)
    chunks = rows.chunks if isinstance(rows, pa.ChunkedArray) else [rows]
    out = []
    for chunk in chunks:
        if len(chunk):  # the text between the chunk's first and last offsets (int64: large)
            _, offsets, data = chunk.buffers()
            ends = pa.Array.from_buffers(
                pa.int64(), len(chunk) + 1, [None, offsets], 0, chunk.offset
            )
            start, end = ends[0].as_py(), ends[-1].as_py()
            out.append(data.slice(start, end - start))
    return out


def csv_header(schema: pa.Schema) -> bytes:
    """The header line: the column names quoted as values are (Spark writes the header through
    the same writer)."""
    names = [
        csv_fields(pa.array([f.name], pa.large_string()), first=i == 0)[0].as_py()
        for i, f in enumerate(schema)
    ]
    return (",".join(names) + "\n").encode("utf-8") if names else b""


def unsupported_csv_type(typ: pa.DataType) -> str | None:
    """Why a column of this type cannot be written as CSV (None: it can)."""
    if pa.types.is_nested(typ):
        return "CSV holds flat values only (Spark's CSV writer refuses it too)"
    if (
        pa.types.is_binary(typ)
        or pa.types.is_large_binary(typ)
        or pa.types.is_fixed_size_binary(typ)
    ):
        return "CSV holds text, not bytes (Spark's CSV writer refuses binary columns too)"
    return None


def _json_value(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def _plain_json(value: Any) -> str:
    return json.dumps(value, default=_json_value, separators=(",", ":"), ensure_ascii=False)


def _needs_typed_json(typ: pa.DataType) -> bool:
    """Whether a column holds a decimal or a map somewhere: values ``json.dumps`` would write
    wrong (a decimal through ``float``, a map as a list of pairs)."""
    if pa.types.is_decimal(typ) or pa.types.is_map(typ):
        return True
    if pa.types.is_struct(typ):
        return any(_needs_typed_json(f.type) for f in typ)
    if pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_fixed_size_list(typ):
        return _needs_typed_json(typ.value_type)
    return False


def _map_key(key: Any) -> str:
    """A map key as Spark's JSON writer names it (its text)."""
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, decimal.Decimal):
        return format(key, "f")
    encoded = _json_value(key) if not isinstance(key, (int, float)) else key
    return encoded if isinstance(encoded, str) else str(encoded)


def _typed_json(value: Any, typ: pa.DataType) -> str:
    """One value as Spark's JSON writer writes it: decimals exact and in plain notation, maps
    as objects, null struct fields left out."""
    if value is None:
        return "null"
    if pa.types.is_decimal(typ):
        return format(value, "f")
    if pa.types.is_map(typ):
        items = (_plain_json(_map_key(k)) + ":" + _typed_json(v, typ.item_type) for k, v in value)
        return "{" + ",".join(items) + "}"
    if pa.types.is_struct(typ):
        fields = (
            _plain_json(f.name) + ":" + _typed_json(value[f.name], f.type)
            for f in typ
            if value.get(f.name) is not None
        )
        return "{" + ",".join(fields) + "}"
    if pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_fixed_size_list(typ):
        return "[" + ",".join(_typed_json(v, typ.value_type) for v in value) + "]"
    return _plain_json(value)


def json_lines(table: pa.Table) -> bytes:
    """JSON lines as Spark writes them: null fields are left out, decimals are exact, maps are
    objects (Spark's reader reads a list of pairs as null)."""
    typed = {f.name: f.type for f in table.schema if _needs_typed_json(f.type)}
    out = []
    for row in table.to_pylist():
        if not typed:
            row = {k: v for k, v in row.items() if v is not None}
            out.append(_plain_json(row))
            continue
        fields = (
            _plain_json(k) + ":" + (_typed_json(v, typed[k]) if k in typed else _plain_json(v))
            for k, v in row.items()
            if v is not None
        )
        out.append("{" + ",".join(fields) + "}")
    return ("\n".join(out) + "\n").encode("utf-8") if out else b""


# -- one partition folder: buffered row groups, rolling files -------------------------------
class FolderWriter:
    """Writes one Hive folder's rows into part files of bounded size."""

    def __init__(
        self,
        store: Store,
        folder: str,
        prefix: str,
        schema: pa.Schema,
        options: FilesOptions,
        dictionaries: DictionaryChoice,
    ):
        self.store, self.folder, self.prefix = store, folder, prefix
        self.schema, self.options, self.dictionaries = schema, options, dictionaries
        self.buffer: list[pa.RecordBatch] = []
        self.buffered_rows = 0
        self.buffered_bytes = 0
        self.current: PartFile | None = None
        self.seq = 0
        self.done: list[WrittenFile] = []
        # JSON/CSV have no row groups: flush every ~64k rows to bound memory
        self.flush_rows = (
            options.row_group_size
            if options.format == "parquet"
            else min(options.row_group_size, 65_536)
        )

    def add(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        self.buffer.append(batch)
        self.buffered_rows += batch.num_rows
        self.buffered_bytes += batch.nbytes
        if self.buffered_rows >= self.flush_rows or self.buffered_bytes >= 256 << 20:
            self.flush()

    def flush(self) -> None:
        if not self.buffer:
            return
        table = pa.Table.from_batches(self.buffer, self.schema)
        self.buffer, self.buffered_rows, self.buffered_bytes = [], 0, 0
        if self.current is None:
            name = f"{self.prefix}-c{self.seq:03d}{file_suffix(self.options)}"
            relpath = f"{self.folder}/{name}" if self.folder else name
            self.current = PartFile(
                self.store, relpath, self.schema, self.options, table, self.dictionaries
            )
            self.seq += 1
        self.current.write(table)
        if self.current.tell() >= self.options.target_file_size:
            self.done.append(self.current.close())
            self.current = None

    def close(self) -> list[WrittenFile]:
        self.flush()
        if self.current is not None:
            self.done.append(self.current.close())
            self.current = None
        return self.done

    def discard(self) -> list[str]:
        """Paths this writer created (for cleanup after a failure)."""
        paths = [f.relpath for f in self.done]
        if self.current is not None:
            try:
                self.current.stream.close()
            except Exception:  # noqa: BLE001 - best effort
                pass
            paths.append(self.current.relpath)
        return paths


class PartitionWriter:
    """All files of one task: one :class:`FolderWriter` per Hive folder."""

    def __init__(self, store: Store, prefix: str, schema: pa.Schema, options: FilesOptions):
        self.store, self.prefix, self.options = store, prefix, options
        self.columns = options.partition_by
        self.data_schema = pa.schema([f for f in schema if f.name not in self.columns])
        self.folders: dict[tuple, FolderWriter] = {}
        self.dictionaries = DictionaryChoice()  # judged once for all the task's files

    def add(self, batch: pa.RecordBatch) -> None:
        if not self.columns:
            self._folder(()).add(batch)
            return
        # Grouped by folder text, never by value equality: "" and null, or every NaN, share
        # one folder and so one group; -0.0 and 0.0 are two folders (eosink.partitions).
        groups = group_by_text(batch, self.columns, partition_text)
        data = batch.select(self.data_schema.names)
        for texts, part in groups.split(data):
            self._folder(texts).add(part)

    def _folder(self, texts: tuple[str, ...]) -> FolderWriter:
        """The writer of one folder, keyed by its texts: one writer (one file name) per folder."""
        writer = self.folders.get(texts)
        if writer is None:
            folder = partition_folder(self.columns, texts) if self.columns else ""
            writer = FolderWriter(
                self.store, folder, self.prefix, self.data_schema, self.options, self.dictionaries
            )
            self.folders[texts] = writer
        return writer

    def close(self) -> list[WrittenFile]:
        out: list[WrittenFile] = []
        for writer in self.folders.values():
            out.extend(writer.close())
        return out

    def discard(self) -> None:
        for writer in self.folders.values():
            for path in writer.discard():
                try:
                    self.store.delete(path)
                except Exception:  # noqa: BLE001 - leftovers are orphans for cleanup
                    pass
