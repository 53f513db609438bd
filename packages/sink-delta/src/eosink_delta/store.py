"""Where a table lives: a local folder, or an object store reached with delta-rs' own client.

``storage_options`` are delta-rs' (its object store's) options as they are: ``AWS_ENDPOINT_URL``,
``AWS_ACCESS_KEY_ID``, ``GOOGLE_SERVICE_ACCOUNT``, ``AZURE_STORAGE_ACCOUNT_NAME``... They go to
every ``DeltaTable`` the sink opens and, for the data files the executors write, to
``deltalake.fs.DeltaStorageHandler``, the same client behind a pyarrow file system, so one set of
options (and the same credentials chain) serves the commits and the files.

Commits on object stores: a commit file ``_delta_log/<version>.json`` is written with a
conditional create (``If-None-Match: *`` on S3, the equivalent on GCS and Azure), by eosink's
own append commit through :func:`object_store` (the client delta-rs uses, built from the same
options) and by delta-rs for the rest. When two
writers race for one version the store lets one create it; the other gets "already exists",
reads the winner's commit and either conflicts (the same app id) or moves to the next version.
A store that ignores the condition lets the second writer overwrite the first's commit: a batch
reported committed is lost. ``AWS_S3_ALLOW_UNSAFE_RENAME`` is the documented opt-out of safe
concurrent writes. Both are refused unless the user promises one writer (``single_writer``).
(The DynamoDB locking provider is gone from delta-rs 1.6; its option no longer changes how
commits are written.)
"""

from __future__ import annotations

import datetime as dt
import os
import re
import threading
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import pyarrow.fs as pafs

from eosink.logs import get_logger
from eosink.plugin import ConfigurationError
from eosink.options import MASK, secret_values

log = get_logger("eosink.delta")

PROBE_DIR = "_eosink_probe"
UNSAFE_RENAME = "AWS_S3_ALLOW_UNSAFE_RENAME"
S3_SCHEMES = ("s3", "s3a")
ENDPOINT_KEYS = ("aws_endpoint_url", "aws_endpoint", "endpoint_url", "endpoint")
#: object_store's HTTP client options; its Python binding takes them apart from the store's.
CLIENT_KEYS = frozenset(
    {
        "allow_http",
        "allow_invalid_certificates",
        "connect_timeout",
        "default_content_type",
        "http1_only",
        "http2_only",
        "http2_keep_alive_interval",
        "http2_keep_alive_timeout",
        "http2_keep_alive_while_idle",
        "http2_max_frame_size",
        "pool_idle_timeout",
        "pool_max_idle_per_host",
        "proxy_url",
        "proxy_ca_certificate",
        "proxy_excludes",
        "randomize_addresses",
        "timeout",
        "user_agent",
    }
)


def is_local(uri: str) -> bool:
    return "://" not in uri


def delta_options(storage_options: dict[str, Any]) -> dict[str, str] | None:
    """The options as delta-rs takes them (strings), ``None`` when there are none."""
    return {k: str(v) for k, v in storage_options.items()} or None


def safe_url(url: str) -> str:
    """``url`` without user info (credentials never reach a log line or an error)."""
    parts = urlsplit(url)
    if parts.username or parts.password:
        return parts._replace(netloc=parts.hostname or "").geturl()
    return url


def filesystem(uri: str, storage_options: dict[str, Any]) -> tuple[pafs.FileSystem, str]:
    """A pyarrow file system for the table folder and the folder's path in it.

    Local folders use pyarrow's own; object stores delta-rs' client (paths relative to the
    table, so the base is empty).
    """
    if is_local(uri):
        return pafs.LocalFileSystem(), uri
    from deltalake.fs import DeltaStorageHandler

    return pafs.PyFileSystem(DeltaStorageHandler(uri, delta_options(storage_options))), ""


def path_in(base: str, relpath: str) -> str:
    return f"{base}/{relpath}" if base else relpath


def existence(uri: str, storage_options: dict[str, Any]) -> Callable[[list[str]], list[bool]]:
    """A function telling which of some paths (relative to the table) exist.

    On object stores one HEAD request a path (pyarrow's file info over delta-rs' client
    lists as well, to tell folders from files: two requests a path).
    """
    if is_local(uri):
        fs = pafs.LocalFileSystem()

        def local(relpaths: list[str]) -> list[bool]:
            infos = fs.get_file_info([f"{uri}/{r}" for r in relpaths])
            return [i.type != pafs.FileType.NotFound for i in infos]

        return local
    from deltalake._internal import DeltaFileSystemHandler

    handler = DeltaFileSystemHandler(uri, delta_options(storage_options))

    def remote(relpaths: list[str]) -> list[bool]:
        found = []
        for relpath in relpaths:
            try:
                handler.open_input_file(relpath)  # a HEAD
            except FileNotFoundError:
                found.append(False)
            else:
                found.append(True)
        return found

    return remote


def _truthy(value: Any) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def _option(storage_options: dict[str, Any], name: str) -> Any:
    for key, value in storage_options.items():
        if key.lower() == name.lower():
            return value
    return os.environ.get(name.upper())


class TableStore:
    """The store checks a sink does once per table and process, before any data is written."""

    def __init__(self, uri: str, storage_options: dict[str, Any], single_writer: bool) -> None:
        self.uri = uri
        self.storage_options = storage_options
        self.single_writer = single_writer
        self.secrets = secret_values(storage_options)
        self.where = safe_url(uri)

    def scrub(self, text: str) -> str:
        """``text`` (an error's) with every credential of the storage options masked, on one
        line and without the client's terminal colours."""
        text = " ".join(re.sub(r"\x1b\[[0-9;]*m", "", text).split())
        for secret in self.secrets:
            text = text.replace(secret, MASK)
        return text

    def check(self) -> None:
        """Refuse a store that cannot take this sink's writes safely: an opt-out of safe
        concurrent commits, a store this process cannot use (wrong credentials, a missing bucket,
        an endpoint that refuses connections, no right to write), an S3-compatible store that
        ignores conditional creates. Each with an error naming the fix; nothing written."""
        if is_local(self.uri):
            return
        self._check_unsafe_rename()
        # delta-rs' client itself (pyarrow's wrapper of it hands Python writes over as
        # buffers, which the client refuses): the same options and credentials as the commits
        from deltalake._internal import DeltaFileSystemHandler

        handler = DeltaFileSystemHandler(self.uri, delta_options(self.storage_options))
        probe = f"{PROBE_DIR}/{uuid.uuid4().hex}"
        try:
            out = handler.open_output_stream(probe)
            out.write(b"eosink-delta access probe\n")
            out.close()
            src = handler.open_input_file(probe)
            src.read(src.size())
        except Exception as exc:  # noqa: BLE001 - every client error is a refusal here
            raise ConfigurationError(self._access_error(handler, exc)) from None
        try:
            if not self.single_writer:
                self._check_conditional_create(probe)
        finally:
            try:  # our probe only: another writer may be checking the store at this moment
                handler.delete_file(probe)
            except Exception:  # noqa: BLE001, S110 - a leftover probe is harmless
                pass

    def _check_unsafe_rename(self) -> None:
        value = _option(self.storage_options, UNSAFE_RENAME)
        if value is None or not _truthy(value) or self.single_writer:
            return
        raise ConfigurationError(
            f"sink 'delta': {UNSAFE_RENAME}=true is set (in storage_options or the environment) "
            f"for {self.where!r}: it opts out of safe concurrent writes, so two writers (or a "
            "restarted query and its zombie) could both commit the same table version and one "
            "batch would be lost. Remove it: delta-rs commits with S3's conditional create and "
            "needs no rename. Or, if exactly one query at a time writes this table, set "
            "single_writer=true. Nothing was written."
        )

    def _access_error(self, handler: Any, exc: BaseException) -> str:
        reason = self.scrub(f"{type(exc).__name__}: {exc}")
        text = str(exc).lower()
        if isinstance(exc, FileNotFoundError):
            return (
                f"sink 'delta': the bucket (or container) of {self.where!r} does not exist "
                f"({reason}). Create it, or fix the path. Nothing was written."
            )
        if "privileges" in text or "forbidden" in text or "access denied" in text:
            if self._can_read(handler):
                return (
                    f"sink 'delta': the store refused to let these credentials write in "
                    f"{self.where!r} ({reason}). Grant them put, get, list and delete rights "
                    "on the table's folder (e.g. s3:PutObject, s3:GetObject, s3:ListBucket, "
                    "s3:DeleteObject). Nothing was written."
                )
            return (
                f"sink 'delta': the store refused the credentials for {self.where!r} "
                f"({reason}). Check the keys in storage_options (e.g. AWS_ACCESS_KEY_ID, "
                "AWS_SECRET_ACCESS_KEY) or the environment's, and that they belong to this "
                "endpoint and may read and write the table's folder. Nothing was written."
            )
        return (
            f"sink 'delta': could not reach the store of {self.where!r} ({reason}). Check the "
            "endpoint (storage_options AWS_ENDPOINT_URL, AWS_ALLOW_HTTP for http://), the "
            "network and the credentials. Nothing was written."
        )

    @staticmethod
    def _can_read(handler: Any) -> bool:
        try:
            handler.get_file_info_selector("_delta_log", allow_not_found=True)
        except Exception:  # noqa: BLE001 - reading is refused too
            return False
        return True

    def asks_conditional_create(self) -> bool:
        """Whether the store must show that it honours conditional create: AWS S3, GCS and
        Azure do; S3-compatible stores at another endpoint may not."""
        scheme = self.uri.split("://", 1)[0].lower()
        return scheme in S3_SCHEMES and any(_option(self.storage_options, k) for k in ENDPOINT_KEYS)

    def _check_conditional_create(self, probe: str) -> None:
        """Create the probe a second time, conditionally, as delta-rs creates a commit file:
        a store that lets it ignores the condition."""
        if not self.asks_conditional_create():
            return
        import obstore

        try:
            obstore.put(self._raw_store(), probe, b"again\n", mode="create")
        except obstore.exceptions.AlreadyExistsError:
            return
        except BaseException as exc:  # noqa: BLE001 - also the binding's panics on odd options
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            raise ConfigurationError(
                f"sink 'delta': could not check that the store of {self.where!r} honours "
                f"conditional create ({self.scrub(str(exc))}); if exactly one query at a time "
                "writes this table, set single_writer=true. Nothing was written."
            ) from None
        raise ConfigurationError(
            f"sink 'delta': the store of {self.where!r} does not honour conditional create (a "
            "second create of one object with If-None-Match succeeded), so two writers (or a "
            "restarted query and its zombie) could both commit the same table version, and one "
            "batch would be lost. Use a store that honours it (AWS S3, GCS, Azure, MinIO...), "
            "or, if exactly one query at a time writes this table, set single_writer=true. "
            "Nothing was written."
        )

    def _raw_store(self) -> Any:
        return object_store(self.uri, self.storage_options)


#: delta-rs' options of its client's retries (object_store's RetryConfig, given apart).
RETRY_KEYS = frozenset(
    {
        "max_retries",
        "retry_timeout",
        "backoff_config.init_backoff",
        "backoff_config.max_backoff",
        "backoff_config.base",
    }
)


def _duration(text: str) -> dt.timedelta:
    """A duration as delta-rs' options spell it (``5ms``, ``2s``, ``1min``; bare: seconds)."""
    found = re.fullmatch(r"\s*([0-9.]+)\s*(ms|s|sec|m|min|h)?\s*", text)
    if not found:
        raise ConfigurationError(f"sink 'delta': {text!r} is not a duration (e.g. 100ms, 2s)")
    number, unit = float(found.group(1)), found.group(2) or "s"
    seconds = {"ms": 0.001, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600}[unit]
    return dt.timedelta(seconds=number * seconds)


def retry_config(options: dict[str, Any]) -> dict[str, Any] | None:
    """delta-rs' retry options as obstore takes them, so that eosink's commit requests retry
    as delta-rs' own would (the same store, the same faults); ``None``: the client's default."""
    retry: dict[str, Any] = {}
    backoff: dict[str, Any] = {}
    if "max_retries" in options:
        retry["max_retries"] = int(options["max_retries"])
    if "retry_timeout" in options:
        retry["retry_timeout"] = _duration(str(options["retry_timeout"]))
    for name in ("init_backoff", "max_backoff"):
        if f"backoff_config.{name}" in options:
            backoff[name] = _duration(str(options[f"backoff_config.{name}"]))
    if "backoff_config.base" in options:
        backoff["base"] = float(options["backoff_config.base"])
    if backoff:
        retry["backoff"] = backoff
    return retry or None


def object_store(uri: str, storage_options: dict[str, Any]) -> Any:
    """object_store's client (its Python binding, ``obstore``) for the table folder ``uri``,
    with the sink's options, as delta-rs builds its own: on S3 the environment's ``AWS_*``
    under the options, as delta-rs merges them. Paths given to the store are relative to the
    table folder. Not for a local folder (see :func:`eosink_delta.log_view.TableLog`)."""
    from obstore.exceptions import UnknownConfigurationKeyError
    from obstore.store import from_url

    scheme = uri.split("://", 1)[0].lower()
    merged: dict[str, Any] = {}
    if scheme in S3_SCHEMES:
        merged = {k.lower(): v for k, v in os.environ.items() if k.upper().startswith("AWS_")}
    merged.update({k.lower(): str(v) for k, v in storage_options.items()})
    config, client = {}, {}
    retry = retry_config(merged)
    for key, value in merged.items():
        bare = key.removeprefix("aws_").removeprefix("google_").removeprefix("azure_")
        if bare in CLIENT_KEYS:
            client[bare] = value
        elif key not in RETRY_KEYS:
            config[key] = value
    while True:  # drop what only delta-rs knows (AWS_S3_ALLOW_UNSAFE_RENAME...)
        try:
            return from_url(
                uri.rstrip("/"), config=config, client_options=client, retry_config=retry
            )
        except UnknownConfigurationKeyError as exc:
            found = re.search(r"key: '([^']+)'", str(exc))
            if not found or config.pop(found.group(1), None) is None:
                raise


_checked: set[tuple] = set()
_checked_lock = threading.Lock()


def check_store(uri: str, storage_options: dict[str, Any], single_writer: bool) -> None:
    """:meth:`TableStore.check`, once per table and process (a stream checks on its first batch)."""
    key = (uri, single_writer, tuple(sorted((delta_options(storage_options) or {}).items())))
    with _checked_lock:
        if key in _checked:
            return
    TableStore(uri, storage_options, single_writer).check()
    with _checked_lock:
        _checked.add(key)
