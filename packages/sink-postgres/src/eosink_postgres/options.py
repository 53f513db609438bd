"""The options of the ``postgres`` sink, from Python keywords or Spark's string options.

The connection is a libpq connection string (``url``: a ``postgresql://`` URL or
``key=value`` pairs) and/or its parts as separate options (``host``, ``port``, ``dbname``,
``user``, ``password``, ``sslmode``); parts override the string's. The password travels with
the sink to the executors, so it is in the options, but it never shows in a ``repr``, a log
line or an error: :func:`scrub` removes it from the text of every error the sink raises.
"""

from __future__ import annotations

import re
from typing import Any

import attrs

from eosink.plugin import ConfigurationError
from eosink.options import MASK, names

MODES = ("append", "upsert")
#: Session settings that change the bytes the sink sends or the server stores (the binary COPY
#: encoder sends UTF-8 text; psycopg's dumpers follow the session's encoding), set by the sink
#: on every connection, never inherited.
SESSION = {"client_encoding": "UTF8", "TimeZone": "UTC"}
SINK = "sink 'postgres'"
#: A part of a qualified name: a plain identifier, or a double-quoted one.
_NAME_PART = r'(?:[A-Za-z_][A-Za-z0-9_$]*|"(?:[^"]|"")+")'
_QUALIFIED = re.compile(rf"^\s*({_NAME_PART})(?:\s*\.\s*({_NAME_PART}))?\s*$")


def _unquote(part: str) -> str:
    """An identifier as PostgreSQL stores it: quoted keeps its case, plain is folded to lower."""
    if part.startswith('"'):
        return part[1:-1].replace('""', '"')
    return part.lower()


def table_name(value: object) -> tuple[str, str]:
    """``"schema.table"`` / ``"table"`` (SQL spelling, quotes allowed) -> (schema, table)."""
    text = "" if value is None else str(value)
    match = _QUALIFIED.match(text)
    if not match:
        raise ConfigurationError(
            f"{SINK}: table {text!r} is not a table name; give [schema.]table, e.g. "
            "'public.orders' (double-quote names with other characters: 'public.\"Orders\"')"
        )
    first, second = match.group(1), match.group(2)
    if second is None:
        return ("public", _unquote(first))
    return (_unquote(first), _unquote(second))


def _checked_table(value: object) -> str:
    table_name(value)  # a clear error now for what is not a table name
    return str(value).strip()


def mask_conninfo(text: str) -> str:
    """A connection string with its password replaced by ``***`` (URL or key=value form)."""
    text = re.sub(r"(://[^:/@]*:)[^@]*@", rf"\1{MASK}@", text)
    text = re.sub(r"(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", rf"\1{MASK}", text)
    return re.sub(r"(?i)([?&]password=)[^&]*", rf"\1{MASK}", text)


@attrs.frozen
class PostgresOptions:
    """Options of the ``postgres`` sink.

    ``table``: the target, ``[schema.]table`` (``path`` is accepted for it, as Spark's
    ``.start(path)`` and ``eosink status postgres TABLE`` give it). ``url``: a libpq connection
    string; ``host``, ``port``, ``dbname``, ``user``, ``password``, ``sslmode`` override its
    parts. ``create_table``: create a missing target from the stream's schema (the type map of
    :mod:`eosink_postgres.types`); without it a missing table is an error. ``mode``:
    ``append`` (default) or ``upsert`` (``INSERT ... ON CONFLICT (key) DO UPDATE``; needs
    ``key``, the columns of a unique constraint of the table). Spark's output mode
    ``complete`` replaces the table's rows in the commit's transaction. ``meta_schema``: the
    schema of the sink's own tables (progress, proofs) and of the staging tables (default
    ``eosink``). ``lock_timeout_s``: how long a commit waits for another writer's commit of the
    same target before failing (bounded, never forever). ``connect_timeout_s``: per connection.
    """

    table: str = attrs.field(converter=lambda v: _checked_table(v))
    url: str = attrs.field(default="", repr=lambda v: repr(mask_conninfo(v)))
    host: str | None = None
    port: int | None = None
    dbname: str | None = None
    user: str | None = None
    password: str | None = attrs.field(default=None, repr=lambda v: repr(v and MASK))
    sslmode: str | None = None
    create_table: bool = True
    mode: str = attrs.field(default="append", converter=lambda v: str(v).strip().lower())
    key: tuple[str, ...] = attrs.field(default=(), converter=names)
    meta_schema: str = "eosink"
    lock_timeout_s: float = 60.0
    connect_timeout_s: float = 10.0

    def __attrs_post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigurationError(
                f"{SINK}: mode {self.mode!r} is unknown; use one of {', '.join(MODES)} "
                "(Spark's complete output mode needs no option)"
            )
        if self.mode == "upsert" and not self.key:
            raise ConfigurationError(
                f"{SINK}: mode 'upsert' needs option key, the columns of the table's unique "
                "constraint that identify a row, e.g. .option('key', 'order_id')"
            )
        if self.key and self.mode != "upsert":
            raise ConfigurationError(
                f"{SINK}: option key is for mode 'upsert'; set .option('mode', 'upsert') or "
                "drop key"
            )
        if not re.fullmatch(r"[a-z_][a-z0-9_]*", self.meta_schema):
            raise ConfigurationError(
                f"{SINK}: meta_schema {self.meta_schema!r}: use lower-case letters, digits "
                "and underscores"
            )
        if self.lock_timeout_s <= 0 or self.connect_timeout_s <= 0:
            raise ConfigurationError(f"{SINK}: timeouts must be positive numbers of seconds")

    @property
    def target(self) -> tuple[str, str]:
        """The target as (schema, table), as PostgreSQL stores the names."""
        return table_name(self.table)

    @property
    def qualified(self) -> str:
        """The target as ``schema.table`` text, for messages."""
        return ".".join(self.target)

    def conninfo(self) -> str:
        """The libpq connection string: ``url`` with the separate parts applied over it, and
        the session settings that change bytes fixed (:data:`SESSION`): whatever the server,
        the database, the role or the environment (``PGCLIENTENCODING``, ``PGTZ``) set as
        default, and whatever the url asks, the session speaks UTF-8 in UTC."""
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        parts: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "dbname": self.dbname,
            "user": self.user,
            "password": self.password,
            "sslmode": self.sslmode,
        }
        try:
            given = str(conninfo_to_dict(self.url).get("options") or "")
            return make_conninfo(
                self.url,
                **{k: v for k, v in parts.items() if v is not None},
                connect_timeout=max(1, round(self.connect_timeout_s)),
                application_name="eosink-postgres",
                client_encoding=SESSION["client_encoding"],
                # the startup packet's settings win over the database's and the role's
                options=" ".join([given, *(f"-c {k}={v}" for k, v in SESSION.items())]).strip(),
            )
        except Exception as exc:  # psycopg.ProgrammingError: a malformed string
            raise ConfigurationError(
                f"{SINK}: option url is not a connection string ({scrub(str(exc), self)}); "
                "give postgresql://user@host:port/dbname or 'host=... dbname=...'"
            ) from None

    def secrets(self) -> list[str]:
        """Every secret the options hold (to scrub from error texts)."""
        found = [self.password] if self.password else []
        match = re.search(r"://[^:/@]*:([^@]*)@", self.url)
        if match and match.group(1):
            found.append(match.group(1))
        match = re.search(r"(?i)password\s*=\s*('(?:[^'\\]|\\.)*'|[^\s&]+)", self.url)
        if match:
            found.append(match.group(1).strip("'"))
        return [s for s in found if s]


def scrub(text: str, options: PostgresOptions | None) -> str:
    """``text`` without any secret of ``options`` and without a connection string's password."""
    text = mask_conninfo(text)
    for secret in options.secrets() if options else ():
        text = text.replace(secret, MASK)
    return text
