"""The options of the ``iceberg`` sink, from Python keywords or Spark's string options.

The catalog is configured with pyiceberg's own catalog properties (``uri``, ``type``,
``warehouse``, ``s3.access-key-id``...): from Python as one dict, ``catalog={...}``; from Spark
as one option per property, ``catalog.<property>`` (``.option("catalog.uri", "sqlite:///...")``),
the way Spark's own Iceberg catalogs take ``spark.sql.catalog.<name>.<property>``. They travel
with the sink to the executors (which write the data files through the catalog's FileIO) and
never show in a ``repr``, a log line or an error: credential-like values are masked.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs

from eosink.plugin import ConfigurationError
from eosink.options import MASK, is_secret_key, mapping_option, masked, names, option_key

#: Spark options ``catalog.<property>`` are the entries of the ``catalog`` field.
CATALOG_PREFIX = "catalog."
#: Table format versions this sink writes (pyiceberg writes v3 only in part).
FORMAT_VERSIONS = (1, 2)
MODES = ("append", "upsert")
COMPRESSIONS = ("zstd", "snappy", "gzip", "lz4", "brotli", "none")
#: The table property Iceberg's writers (Spark's, pyiceberg's) take their Parquet codec from,
#: and its default there.
CODEC_PROPERTY = "write.parquet.compression-codec"
DEFAULT_CODEC = "zstd"


#: A URL query's parameter: its separator, name and value.
_QUERY_PARAMETER = re.compile(r"([?&])([^=&#?]+)=([^&#]*)")


def query_secrets(text: str) -> list[str]:
    """The values of a URL query's credential-like parameters (``?password=...``, which
    SQLAlchemy passes on to the database driver; ``token=``...)."""
    return [m.group(3) for m in _QUERY_PARAMETER.finditer(text) if is_secret_key(m.group(2))]


def mask_uri(text: str) -> str:
    """``text`` with its user info (``user:pass@``) and credential-like query values masked."""
    text = masked(text)

    def hide(match: re.Match[str]) -> str:
        if is_secret_key(match.group(2)) and match.group(3):
            return f"{match.group(1)}{match.group(2)}={MASK}"
        return match.group(0)

    return _QUERY_PARAMETER.sub(hide, text)


def shown_catalog(catalog: Mapping[str, str]) -> dict[str, str]:
    """The catalog properties as a ``repr`` may show them: credentials masked, in values whose
    key says so and inside URIs."""
    return {k: MASK if is_secret_key(k) else mask_uri(v) for k, v in catalog.items()}


def catalog_properties(value: Any) -> dict[str, str]:
    """attrs converter of ``catalog``: a dict (or its JSON text), values as strings."""
    value = mapping_option(
        value,
        "sink 'iceberg': option catalog: give pyiceberg's catalog properties as a dict "
        "(Python) or one Spark option per property, e.g. .option('catalog.uri', "
        "'sqlite:////tmp/catalog.db')",
    )
    return {str(k): str(v) for k, v in value.items()}


def partition_fields(value: Any) -> tuple[str, ...]:
    """attrs converter of ``partition_by``: a list, or Spark's one string of entries separated
    by commas outside parentheses (``"bucket(16, id), day(ts)"``)."""
    if value is None:
        return ()
    if not isinstance(value, str):
        return names(value)
    entries, depth, current = [], 0, ""
    for char in value:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            entries.append(current)
            current = ""
        else:
            current += char
    entries.append(current)
    return tuple(e.strip() for e in entries if e.strip())


def identifier(value: Any) -> str:
    text = str(value or "").strip()
    if not text or "." not in text or text.startswith(".") or text.endswith("."):
        raise ConfigurationError(
            f"sink 'iceberg': table {text!r} is not a table identifier; give it as "
            "'<namespace>.<table>', e.g. 'lake.events'"
        )
    return text


def split_catalog_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Spark-style options with every ``catalog.<property>`` gathered into ``catalog``, and
    ``path`` (what ``.save(...)`` and the ``eosink`` command's TARGET give) read as ``table``."""
    out: dict[str, Any] = {}
    catalog: dict[str, Any] = {}
    for name, value in options.items():
        if name.lower().startswith(CATALOG_PREFIX):
            catalog[name[len(CATALOG_PREFIX) :]] = value
        else:
            out[name] = value
    if catalog:
        out["catalog"] = {**catalog_properties(out.get("catalog")), **catalog}
    if "path" in out and "table" not in {k.lower() for k in out}:
        out["table"] = out.pop("path")
    for name, value in list(out.items()):
        # split here: the generic option reader would split "bucket(16, id)" at its comma
        if option_key(name) == "partitionby" and isinstance(value, str):
            out[name] = partition_fields(value)
    return out


@attrs.frozen
class IcebergOptions:
    """Options of the ``iceberg`` sink.

    ``table``: the table identifier, ``<namespace>.<table>`` (also given as ``path``).
    ``catalog``: pyiceberg's catalog properties (``type``: ``sql``, ``rest``, ``glue``,
    ``hive``...; ``uri``; ``warehouse``; FileIO properties such as ``s3.endpoint``);
    ``catalog_name``: the catalog's name (the SQL catalog keys its rows by it).
    ``create``: create the table on the first write if it is missing (its schema from the
    stream's, see the README's type map; partitioned by ``partition_by``);
    ``create_namespace``: also create a missing namespace. ``partition_by``: a new table's
    partition spec, one field per entry: ``col``, ``year(col)``, ``month(col)``, ``day(col)``,
    ``hour(col)``, ``bucket(N, col)``, ``truncate(W, col)``; for an existing table it is
    checked against the table's spec when given. ``merge_schema``: add the stream's new
    columns to the table (as Delta's ``mergeSchema``); without it a difference is an error.
    ``format_version``: a new table's format version (1 or 2). ``commit_retries``: how often
    a commit that lost a race with another writer is tried again, after re-checking the proof.
    ``keep_snapshots``: when positive, each batch's commit also expires every snapshot but the
    newest ``keep_snapshots`` (branch and tag heads always stay), so the table metadata, and
    with it each commit's cost, stops growing with the stream; 0 (the default) expires none.
    The proof is a table property: expiry never removes it.
    ``compression``, ``row_group_rows`` shape the Parquet files; without ``compression`` the
    table's ``write.parquet.compression-codec`` names the codec, as for Iceberg's own writers
    (:func:`parquet_codec`).
    ``mode``: ``append`` (default) or ``upsert``: the batch's rows replace the table's rows of
    the same ``key`` (one or more columns) in the commit that appends them (the README's
    "Keyed upserts"; Spark's ``update`` output mode writes here).
    """

    table: str = attrs.field(converter=identifier)
    catalog: dict[str, str] = attrs.field(
        factory=dict,
        converter=catalog_properties,
        repr=lambda value: repr(shown_catalog(value)),
        hash=False,
    )
    catalog_name: str = "eosink"
    create: bool = True
    create_namespace: bool = False
    partition_by: tuple[str, ...] = attrs.field(default=(), converter=partition_fields)
    merge_schema: bool = False
    format_version: int = 2
    commit_retries: int = 8
    keep_snapshots: int = 0
    compression: str = ""  # "": the table's codec (parquet_codec)
    row_group_rows: int = 1_000_000
    mode: str = "append"
    key: tuple[str, ...] = attrs.field(default=(), converter=names)

    def __attrs_post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigurationError(
                f"sink 'iceberg': mode {self.mode!r} is unknown; use 'append' or 'upsert' "
                "(with key=[...])"
            )
        if self.mode == "upsert" and not self.key:
            raise ConfigurationError(
                "sink 'iceberg': mode 'upsert' needs option key, the columns that identify a "
                "row, e.g. key=['user_id'] or .option('key', 'user_id')"
            )
        if self.key and self.mode != "upsert":
            raise ConfigurationError(
                "sink 'iceberg': option key is for mode 'upsert'; set mode='upsert' or drop key"
            )
        if not self.catalog:
            raise ConfigurationError(
                "sink 'iceberg': no catalog given; set pyiceberg's catalog properties, e.g. "
                "catalog={'type': 'sql', 'uri': 'sqlite:////data/catalog.db', 'warehouse': "
                "'file:///data/warehouse'} or .option('catalog.uri', ...) from Spark"
            )
        if self.format_version not in FORMAT_VERSIONS:
            raise ConfigurationError(
                f"sink 'iceberg': format_version {self.format_version} is not one this sink "
                f"writes; use one of {', '.join(map(str, FORMAT_VERSIONS))}"
            )
        if self.compression and self.compression.lower() not in COMPRESSIONS:
            raise ConfigurationError(
                f"sink 'iceberg': compression {self.compression!r} is unknown; use one of "
                f"{', '.join(COMPRESSIONS)}"
            )
        if self.commit_retries < 0 or self.row_group_rows < 1 or self.keep_snapshots < 0:
            raise ConfigurationError(
                "sink 'iceberg': commit_retries and keep_snapshots must be >= 0 and "
                "row_group_rows positive"
            )

    @property
    def namespace(self) -> str:
        return self.table.rsplit(".", 1)[0]


def parquet_codec(compression: str, properties: Mapping[str, str], table: str) -> str:
    """The codec of the Parquet files a batch writes: the ``compression`` option when given,
    else the table's ``write.parquet.compression-codec`` (Iceberg's default, zstd, when it sets
    none): a table's owner sets the codec once for every writer of the table."""
    if compression:
        return compression.lower()
    codec = properties.get(CODEC_PROPERTY, DEFAULT_CODEC).lower()
    codec = "none" if codec == "uncompressed" else codec
    if codec not in COMPRESSIONS:
        raise ConfigurationError(
            f"sink 'iceberg': table {table} sets {CODEC_PROPERTY} to {codec!r}, a codec this "
            f"sink does not write; set option compression (one of {', '.join(COMPRESSIONS)}) "
            "or the table's property to one of them. Nothing was written."
        )
    return codec
