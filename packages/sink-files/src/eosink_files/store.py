"""Where the files go: the local filesystem or any fsspec filesystem, behind one small API.

Everything is addressed by a path relative to the sink's folder (POSIX separators). The one
operation that needs care is :meth:`Store.publish`: create a file with its full content, only if
it does not exist yet, so that a reader never sees a partial file and two writers never both
believe they wrote it.

* local files: write a temporary file, ``fsync``, then ``os.link`` it to its name (fails if
  the name exists), then remove the temporary name;
* ``memory://``: the store lives in this process; a lock makes check-and-create atomic;
* object stores with a conditional create (S3 ``If-None-Match``, GCS ``ifGenerationMatch=0``,
  Azure ``overwrite=False``): fsspec's exclusive mode ``"xb"``, uploaded on close;
* any other filesystem cannot publish atomically: refused unless the user promises a single
  writer (``single_writer=true``).
"""

from __future__ import annotations

import os
import shutil
import threading
import uuid
from collections.abc import Iterable, Iterator
from typing import Any, Union
from urllib.parse import quote, unquote, urlsplit

from eosink.logs import get_logger
from eosink.plugin import ConfigurationError

#: fsspec protocols whose exclusive create ("xb") is atomic on the store's side.
CONDITIONAL_CREATE = {"s3", "s3a", "gcs", "gs", "abfs", "abfss", "az"}

#: Characters kept as they are in a manifest path (RFC 3986 pchar plus "/"), as Hadoop's
#: ``Path.toUri`` does: everything else is percent-encoded, "%" included.
URI_SAFE = "/:@!$&'()*+,;=-._~"

#: The scheme of each fsspec protocol in the paths Spark's Hadoop filesystems resolve:
#: hadoop-aws reads ``s3a://``, the GCS connector ``gs://``, hadoop-azure ``abfss://``.
#: Protocols not named here keep their own name (``file``, ``hdfs``, ``memory``...).
SPARK_SCHEMES = {
    "s3": "s3a",
    "s3a": "s3a",
    "s3n": "s3a",
    "gs": "gs",
    "gcs": "gs",
    "abfs": "abfss",
    "abfss": "abfss",
    "az": "abfss",
}
AZURE = {"abfs", "abfss", "az", "wasb", "wasbs"}
#: Schemes that name the same store, for reading back paths written with either spelling.
_FAMILY = {"s3a": "s3", "s3n": "s3", "gcs": "gs", **{a: "azure" for a in AZURE}}

#: Requests at most in flight when the commit checks a batch's files (one HEAD each).
HEAD_CONCURRENCY = 32

#: Where the access probe of an object store is written (Spark's reader and the cleanup skip
#: folders whose names start with "_").
PROBE_DIR = "_eosink_probe"

log = get_logger("eosink.files")

_memory_lock = threading.Lock()

#: What a log file is published from: its bytes, or its chunks (a compaction streams them).
Data = Union[bytes, Iterable[bytes]]


def chunks(data: Data) -> Iterable[bytes]:
    return (data,) if isinstance(data, bytes) else data


def _write_whole(f: Any, data: Data) -> None:
    """Write ``data`` into ``f`` (just opened for writing) and close it, which uploads it; if
    producing or writing ``data`` fails, upload nothing.

    The data of a compaction is produced while it is written (the previous compact is
    streamed), so that may fail part-way. fsspec's buffered files (s3fs, gcsfs, adlfs)
    upload what they hold when they are closed, and ``with`` and their ``__del__`` close them
    after an error too: a log file cut short would be published, and every writer would then
    refuse the folder.
    """
    try:
        for chunk in chunks(data):
            f.write(chunk)
    except BaseException:
        _abandon(f)
        raise
    f.close()


def _abandon(f: Any) -> None:
    """Drop a file being written without publishing it (see :func:`_write_whole`).

    ``discard`` ends the upload the store has begun: s3fs aborts its multipart upload, gcsfs
    cancels its resumable upload (adlfs' staged blocks stay uncommitted: invisible, and
    removed by Azure). Marking the file closed keeps ``close`` and ``__del__`` from uploading
    the buffer. A file of another kind is closed: the caller removes what it left.
    """
    discard = getattr(f, "discard", None)
    if discard is None:
        f.close()
        return
    try:
        discard()
    except Exception as exc:  # noqa: BLE001 - an unfinished upload is invisible to readers
        log.warning("files.upload_discard_failed", error=type(exc).__name__)
    finally:
        f.closed = True


def spark_root_uri(
    location: str,
    *,
    scheme: str | None = None,
    account: str | None = None,
    root: str | None = None,
) -> str:
    """The folder at fsspec URL ``location`` as the URI Spark resolves, the manifest's prefix.

    ``scheme`` overrides the default (e.g. ``s3`` where EMRFS reads ``s3://``). Azure paths
    name the container *and* the storage account (``abfss://c@a.dfs.core.windows.net/...``);
    adlfs takes the account from the URL or its options, so ``account`` supplies it when the
    URL has none. ``root`` is fsspec's path of the folder, used for the protocols Spark reads
    by their own name.
    """
    protocol, _, rest = location.partition("://")
    protocol = protocol.lower()
    target = (scheme or SPARK_SCHEMES.get(protocol, protocol)).lower()
    if protocol in AZURE:
        netloc, _, path = rest.partition("/")
        container, _, host = netloc.partition("@")
        account = host.split(".", 1)[0] if host else account
        if not account:
            raise ConfigurationError(
                f"sink 'files': Spark's reader needs the storage account in each manifest path, "
                f"but {safe_url(location)!r} does not name it; give the path as "
                "abfss://<container>@<account>.dfs.core.windows.net/<folder>"
            )
        domain = "blob" if target.startswith("wasb") else "dfs"
        path = path.strip("/")
        return f"{target}://{container}@{account}.{domain}.core.windows.net" + (
            "/" + quote(path, safe=URI_SAFE) if path else ""
        )
    if protocol not in SPARK_SCHEMES and root is not None:
        rest = root
    lead = "/" if rest.startswith("/") else ""
    return f"{target}://{lead}{quote(rest.strip('/'), safe=URI_SAFE)}"


def _canonical(uri: str) -> tuple[str, str]:
    """``(store, path)`` of a manifest URI, the same for every spelling of one store's path."""
    parts = urlsplit(uri)
    scheme = (parts.scheme or "file").lower()
    family = _FAMILY.get(scheme, scheme)
    if family == "file":  # "file:/x", "file:///x" and "file://host/x" all mean /x here
        return family, unquote(parts.path)
    netloc = parts.netloc.split("@", 1)[0] if family == "azure" else parts.netloc
    return family, unquote(netloc + parts.path)


def safe_url(url: str) -> str:
    """``url`` without user info (credentials never reach a log line or an error)."""
    parts = urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname or ""
        return parts._replace(netloc=host + (f":{parts.port}" if parts.port else "")).geturl()
    return url


class Store:
    """A sink folder on some filesystem."""

    location: str  # what the user gave, normalized (absolute path or URL)
    root_uri: str  # the folder as a URI, the prefix of every manifest path

    def uri(self, relpath: str) -> str:
        return f"{self.root_uri}/{quote(relpath, safe=URI_SAFE)}"

    def relpath_of(self, uri: str) -> str | None:
        """The path relative to the folder of a manifest entry's URI, or None if outside it.

        Any spelling of the store is accepted (``s3a://`` and ``s3://``, an Azure path with or
        without its account), so folders written by Spark's own sink read back too.
        """
        (mine, root), (theirs, path) = _canonical(self.root_uri), _canonical(uri)
        root = root.rstrip("/") + "/"
        return path[len(root) :] if mine == theirs and path.startswith(root) else None

    # The filesystem operations every store implements.
    def kind(self) -> str:
        ...

    def is_file(self, relpath: str = "") -> bool:
        ...

    def exists(self, relpath: str = "") -> bool:
        ...

    def probe(
        self, relpaths: list[str], tail: tuple[str, int] | None = None
    ) -> tuple[set[str], bytes | None]:
        """Which of these files exist, and the bytes of ``tail`` = (one of them, an offset) from
        that offset to its end (None if it is absent). Object stores: one round trip for all.

        A file cut below the offset reads as ``b""`` (or shorter): callers compare sizes.
        """
        found = {r for r in relpaths if self.is_file(r)}
        data = None
        if tail is not None and tail[0] in found:
            try:
                data = self.read_from(*tail)
            except FileNotFoundError:
                found.discard(tail[0])
        return found, data

    def read_from(self, relpath: str, offset: int) -> bytes:
        """The file's bytes from ``offset`` to its end (none past its end)."""
        with self.open_read(relpath) as f:
            f.seek(offset)
            return f.read()

    def listdir(self, relpath: str = "") -> list[tuple[str, bool]]:
        ...  # (name, is_dir)

    def makedirs(self, relpath: str) -> None:
        ...

    def read_bytes(self, relpath: str) -> bytes:
        ...

    def open_read(self, relpath: str) -> Any:
        ...

    def open_write(self, relpath: str) -> Any:
        ...

    def stat(self, relpath: str) -> tuple[int, int]:
        ...  # size, mtime in ms

    def sizes(self, folder: str, names: list[str]) -> dict[str, int]:
        ...  # size of each of ``names`` found in ``folder`` (missing names are left out)

    def delete(self, relpath: str) -> None:
        ...

    def delete_tree(self, relpath: str) -> None:
        ...  # a folder and everything in it; nothing if it is not there

    def move(self, relpath: str, to: str) -> None:
        ...  # rename within the folder; parent folders of ``to`` are created

    def publish(self, relpath: str, data: Data, crash: Any = None, overwrite: bool = False) -> bool:
        ...  # create only if absent; ``overwrite``: replace a torn file (single-writer mode)

    def read_tail(self, relpath: str, size: int) -> tuple[int, bytes]:
        ...  # the file's size and its last ``size`` bytes (all of a smaller file)

    def walk(self, relpath: str = "") -> Iterator[tuple[str, int, int]]:
        ...  # rel, size, mtime

    def atomic_publish(self) -> bool:
        return True

    def access_refusal(self, exc: BaseException) -> str | None:
        """The clear refusal of a store this process cannot use, for an error ``exc`` its
        client raised (None: ``exc`` says nothing about the store's configuration)."""
        return None

    def check_access(self, conditional: bool) -> None:
        """Refuse, before anything is written, a store this process cannot use (see FsspecStore)."""


class LocalStore(Store):
    def __init__(self, location: str) -> None:
        self.location = location
        self.root = location
        self.root_uri = "file://" + quote(location.rstrip("/") or "/", safe=URI_SAFE)

    def kind(self) -> str:
        return "file"

    def _p(self, relpath: str) -> str:
        return os.path.join(self.root, relpath) if relpath else self.root

    def is_file(self, relpath: str = "") -> bool:
        return os.path.isfile(self._p(relpath))

    def exists(self, relpath: str = "") -> bool:
        return os.path.exists(self._p(relpath))

    def listdir(self, relpath: str = "") -> list[tuple[str, bool]]:
        try:
            with os.scandir(self._p(relpath)) as entries:
                return [(e.name, e.is_dir()) for e in entries]
        except (FileNotFoundError, NotADirectoryError):
            return []

    def makedirs(self, relpath: str) -> None:
        os.makedirs(self._p(relpath), exist_ok=True)

    def read_bytes(self, relpath: str) -> bytes:
        with open(self._p(relpath), "rb") as f:
            return f.read()

    def open_read(self, relpath: str) -> Any:
        return open(self._p(relpath), "rb")

    def open_write(self, relpath: str) -> Any:
        import pyarrow as pa

        path = self._p(relpath)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return pa.output_stream(path, compression=None, buffer_size=1 << 20)

    def stat(self, relpath: str) -> tuple[int, int]:
        st = os.stat(self._p(relpath))
        return st.st_size, int(st.st_mtime * 1000)

    def sizes(self, folder: str, names: list[str]) -> dict[str, int]:
        # One stat per name: a system call, not a request, while a listing of a folder that
        # holds the table's history would cost O(table).
        out = {}
        for name in names:
            try:
                out[name] = os.stat(self._p(f"{folder}/{name}" if folder else name)).st_size
            except FileNotFoundError:
                pass
        return out

    def delete(self, relpath: str) -> None:
        try:
            os.unlink(self._p(relpath))
        except FileNotFoundError:
            pass

    def delete_tree(self, relpath: str) -> None:
        shutil.rmtree(self._p(relpath), ignore_errors=True)

    def move(self, relpath: str, to: str) -> None:
        target = self._p(to)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.rename(self._p(relpath), target)

    def read_tail(self, relpath: str, size: int) -> tuple[int, bytes]:
        with open(self._p(relpath), "rb") as f:
            total = os.fstat(f.fileno()).st_size
            f.seek(max(0, total - size))
            return total, f.read()

    def publish(self, relpath: str, data: Data, crash: Any = None, overwrite: bool = False) -> bool:
        final = self._p(relpath)
        if overwrite:
            self.delete(relpath)
        folder = os.path.dirname(final)
        os.makedirs(folder, exist_ok=True)
        tmp = os.path.join(folder, f".{os.path.basename(final)}.{uuid.uuid4().hex}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            with os.fdopen(fd, "wb") as f:
                for chunk in chunks(data):
                    f.write(chunk)
                f.flush()
                os.fsync(f.fileno())
            if crash:
                crash()
            try:
                os.link(tmp, final)  # atomic; fails if the name exists
            except FileExistsError:
                return False
            return True
        finally:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass

    def walk(self, relpath: str = "") -> Iterator[tuple[str, int, int]]:
        base = self._p(relpath)
        for folder, dirs, files in os.walk(base):
            dirs[:] = [d for d in dirs if not d.startswith(("_", "."))] if folder == base else dirs
            for name in files:
                full = os.path.join(folder, name)
                try:
                    st = os.stat(full)
                except FileNotFoundError:
                    continue
                yield os.path.relpath(full, self.root), st.st_size, int(st.st_mtime * 1000)


def open_store(
    location: str,
    manifest_scheme: str | None = None,
    storage_options: dict[str, Any] | None = None,
) -> Store:
    """The store of a normalized location (see ``FilesOptions.path``)."""
    if "://" not in location:
        return LocalStore(location)
    from eosink_files.fsspec_store import FsspecStore  # imports fsspec: only for URLs

    return FsspecStore(location, manifest_scheme, storage_options)
