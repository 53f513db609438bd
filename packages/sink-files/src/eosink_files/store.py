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
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Iterable, Iterator
from typing import Any, Union
from urllib.parse import quote, unquote, urlsplit

from eosink.logs import get_logger
from eosink.plugin import ConfigurationError, clock
from eosink.options import MASK, secret_values

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


class FsspecStore(Store):
    def __init__(
        self,
        location: str,
        manifest_scheme: str | None = None,
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        import fsspec

        from eosink_files.options import fsspec_options

        self.location = location
        self.protocol = location.split("://", 1)[0].lower()
        self.secrets = secret_values(storage_options or {})
        self.access_checked = False
        # Never a listings cache: fsspec keeps one filesystem per process and options, s3fs,
        # gcsfs and adlfs keep listings in it without expiry, and Spark reuses its Python
        # workers across batches. Only this process's own writes invalidate those listings, so
        # a worker that listed the log folder and then saw other processes commit would be
        # told that their newer log files do not exist. Every decision reads the store.
        kwargs = {**fsspec_options(storage_options or {}), "use_listings_cache": False}
        try:
            self.fs, self.root = fsspec.core.url_to_fs(location, **kwargs)
        except (ImportError, ValueError) as exc:
            raise ConfigurationError(
                f"sink 'files': no filesystem for {safe_url(location)!r} "
                f"({self.scrub(str(exc))}); install the fsspec implementation of "
                f"{self.protocol!r} (e.g. s3fs for s3://, gcsfs for gs://, adlfs for abfs://)"
            ) from None
        except TypeError as exc:  # an option the filesystem does not take
            raise ConfigurationError(
                f"sink 'files': the {self.protocol!r} filesystem does not take these "
                f"storage_options ({self.scrub(str(exc))}); see its documentation for the "
                "keyword arguments it accepts"
            ) from None
        self.root = self.root.rstrip("/")
        self.root_uri = spark_root_uri(
            location,
            scheme=manifest_scheme,
            account=getattr(self.fs, "account_name", None),
            root=self.root,
        )

    def kind(self) -> str:
        return self.protocol

    @property
    def conditional_create(self) -> bool:
        """Whether ``open(path, "xb")`` is decided atomically by the store: the object stores
        above, and any fsspec filesystem that says so with ``exclusive_create_is_atomic``
        (a filesystem of your own, or the conformance kit's faulty object store)."""
        return self.protocol in CONDITIONAL_CREATE or bool(
            getattr(self.fs, "exclusive_create_is_atomic", False)
        )

    def atomic_publish(self) -> bool:
        return self.protocol == "memory" or self.conditional_create

    def scrub(self, text: str) -> str:
        """``text`` (an error's) with every credential of the storage options masked."""
        for secret in self.secrets:
            text = text.replace(secret, MASK)
        return text

    def check_access(self, conditional: bool) -> None:
        """Write, read back and delete a probe object, once per store: refuse a store this
        process cannot use (wrong credentials, a missing bucket, an endpoint that refuses
        connections, no right to write) before any data is written.

        ``conditional``: also create the probe a second time, exclusively, and refuse a store
        that lets it (an S3-compatible store that ignores ``If-None-Match``): there two writers
        could both publish the same log entry.
        """
        if self.access_checked or self.protocol == "memory":
            return
        probe = f"{PROBE_DIR}/{uuid.uuid4().hex}"
        where = safe_url(self.location)
        try:
            with self.fs.open(self._p(probe), "xb") as f:
                f.write(b"eosink-files access probe\n")  # not empty: s3fs sends empty files
            self.read_bytes(probe)  # unconditionally
            if conditional:
                try:
                    with self.fs.open(self._p(probe), "xb") as f:
                        f.write(b"eosink-files access probe, again\n")
                except FileExistsError:
                    pass
                else:
                    raise ConfigurationError(
                        f"sink 'files': the store of {where!r} does not honour conditional "
                        "create (a second exclusive create of one object succeeded: "
                        "If-None-Match is ignored), so two writers (or a restarted query and "
                        "its zombie) could both publish the same log entry. Use a store that "
                        "honours it (AWS S3, GCS, Azure, MinIO...), or, if exactly one query at a "
                        "time writes this folder, set single_writer=true."
                    )
        except ConfigurationError:
            raise
        except Exception as exc:  # noqa: BLE001 - every client error is a refusal here
            raise ConfigurationError(self._access_error(where, exc)) from None
        try:
            self.fs.rm_file(self._p(probe))
        except Exception:  # noqa: BLE001, S110 - a leftover probe is harmless
            pass
        self.access_checked = True

    def _access_error(self, where: str, exc: BaseException) -> str:
        reason = self.scrub(f"{type(exc).__name__}: {exc}")
        if isinstance(exc, PermissionError):
            text = str(exc).lower()
            if any(w in text for w in ("accessdenied", "access denied", "forbidden", "403")):
                return (
                    f"sink 'files': the store refused to let these credentials write, read or "
                    f"delete in {where!r} ({reason}). Grant them put, get, list and delete "
                    "rights on the folder (e.g. s3:PutObject, s3:GetObject, s3:ListBucket, "
                    "s3:DeleteObject). Nothing was written."
                )
            return (
                f"sink 'files': the store refused the credentials for {where!r} ({reason}). "
                "Check the key and secret (storage_options key/secret, or the environment's "
                "credentials) and that they belong to this endpoint. Nothing was written."
            )
        if isinstance(exc, FileNotFoundError):
            return (
                f"sink 'files': the bucket (or container) of {where!r} does not exist ({reason}). "
                "Create it, or fix the path. Nothing was written."
            )
        return (
            f"sink 'files': could not reach the store of {where!r} ({reason}). Check the "
            "endpoint (storage_options endpoint_url / client_kwargs), the network and the "
            "credentials. Nothing was written."
        )

    def _p(self, relpath: str) -> str:
        return f"{self.root}/{relpath}" if relpath else self.root

    def is_file(self, relpath: str = "") -> bool:
        return self.fs.isfile(self._p(relpath))

    def probe(
        self, relpaths: list[str], tail: tuple[str, int] | None = None
    ) -> tuple[set[str], bytes | None]:
        # The first byte of each, and the tail, concurrently where the filesystem is
        # asynchronous (s3fs, gcsfs, adlfs): one ranged GET each, where exists() costs a HEAD
        # and, for a missing key, a listing too. Only non-empty files are asked about (log
        # files). Ranges from an offset, never suffix ranges: adlfs does not take those.
        asked = [r for r in relpaths if tail is None or r != tail[0]]
        starts, ends = [0] * len(asked), [1] * len(asked)
        if tail is not None:
            asked.append(tail[0])
            starts.append(tail[1])
            ends.append(None)
        paths = [self._p(r) for r in asked]
        got = self.fs.cat_ranges(paths, starts, ends, on_error="return")
        found, data = set(), None
        for relpath, result in zip(asked, got):
            if isinstance(result, FileNotFoundError):
                continue
            if tail is not None and relpath == tail[0]:
                if isinstance(result, BaseException):  # e.g. a range past a file cut short
                    try:
                        result = self.read_from(*tail)
                    except FileNotFoundError:
                        continue
                data = result
            elif isinstance(result, BaseException):
                raise result
            found.add(relpath)
        return found, data

    def read_from(self, relpath: str, offset: int) -> bytes:
        path = self._p(relpath)
        if offset and offset >= self.fs.size(path):
            return b""  # object stores refuse a range that starts past the end
        return self.fs.cat_file(path, start=offset)

    def exists(self, relpath: str = "") -> bool:
        return self.fs.exists(self._p(relpath))

    def listdir(self, relpath: str = "") -> list[tuple[str, bool]]:
        try:
            entries = self.fs.ls(self._p(relpath), detail=True, refresh=True)
        except TypeError:  # filesystems without a refresh flag
            entries = self.fs.ls(self._p(relpath), detail=True)
        except FileNotFoundError:
            return []
        base = self._p(relpath).rstrip("/")
        out = []
        for e in entries:
            name = e["name"].rstrip("/")
            if name == base:
                continue
            out.append((name.rsplit("/", 1)[-1], e.get("type") == "directory"))
        return out

    def makedirs(self, relpath: str) -> None:
        self.fs.makedirs(self._p(relpath), exist_ok=True)

    def read_bytes(self, relpath: str) -> bytes:
        return self.fs.cat_file(self._p(relpath))

    def open_read(self, relpath: str) -> Any:
        return self.fs.open(self._p(relpath), "rb")

    def open_write(self, relpath: str) -> Any:
        return self.fs.open(self._p(relpath), "wb")

    def stat(self, relpath: str) -> tuple[int, int]:
        info = self.fs.info(self._p(relpath))
        mtime = info.get("mtime") or info.get("LastModified") or info.get("created")
        if hasattr(mtime, "timestamp"):
            mtime = mtime.timestamp()
        return int(info["size"]), int(float(mtime or clock.now()) * 1000)

    def sizes(self, folder: str, names: list[str]) -> dict[str, int]:
        # One HEAD per file, HEAD_CONCURRENCY at a time: a listing of the folder would cost a
        # request per 1,000 objects the folder holds (the whole table, when unpartitioned).
        paths = [self._p(f"{folder}/{name}" if folder else name) for name in names]
        out = {}
        for name, info in zip(names, self._infos(paths)):
            if isinstance(info, FileNotFoundError):
                continue
            if isinstance(info, BaseException):
                raise info
            if info.get("type") != "directory":
                out[name] = int(info.get("size") or 0)
        return out

    def _infos(self, paths: list[str]) -> list[Any]:
        """``fs.info`` of each path (or the exception it raised), at most HEAD_CONCURRENCY
        requests at a time: on the filesystem's event loop where it is asynchronous (s3fs,
        gcsfs, adlfs), in threads otherwise."""
        if not paths:
            return []
        if getattr(self.fs, "async_impl", False) and hasattr(self.fs, "_info"):
            from fsspec.asyn import _run_coros_in_chunks, sync

            coros = [self.fs._info(p) for p in paths]
            return list(
                sync(
                    self.fs.loop,
                    _run_coros_in_chunks,
                    coros,
                    batch_size=HEAD_CONCURRENCY,
                    return_exceptions=True,
                )
            )

        def info(path: str) -> Any:
            try:
                return self.fs.info(path)
            except Exception as exc:  # noqa: BLE001 - handed back, as the asynchronous path does
                return exc

        with ThreadPoolExecutor(min(HEAD_CONCURRENCY, len(paths))) as pool:
            return list(pool.map(info, paths))

    def delete(self, relpath: str) -> None:
        try:
            self.fs.rm_file(self._p(relpath))
        except FileNotFoundError:
            pass

    def delete_tree(self, relpath: str) -> None:
        try:
            self.fs.rm(self._p(relpath), recursive=True)
        except FileNotFoundError:
            pass

    def move(self, relpath: str, to: str) -> None:
        self.fs.mv(self._p(relpath), self._p(to))

    def read_tail(self, relpath: str, size: int) -> tuple[int, bytes]:
        path = self._p(relpath)
        total = self.fs.size(path)
        return total, self.fs.cat_file(path, start=max(0, total - size))

    def publish(self, relpath: str, data: Data, crash: Any = None, overwrite: bool = False) -> bool:
        path = self._p(relpath)
        if crash:
            crash()
        if overwrite:
            self.delete(relpath)
        if self.protocol == "memory":
            with _memory_lock:  # the memory store is this process's: a lock makes it atomic
                if self.fs.exists(path):
                    return False
                self.fs.pipe_file(path, b"".join(chunks(data)))
                return True
        if self.conditional_create:
            try:
                # the store refuses the upload (at close) if the name exists
                _write_whole(self.fs.open(path, "xb"), data)
            except FileExistsError:
                return False
            return True
        # single-writer mode (checked by the sink): no concurrent writer can race this check
        if self.fs.exists(path):
            return False
        try:
            _write_whole(self.fs.open(path, "wb"), data)
        except BaseException:
            self.delete(relpath)  # a filesystem that writes in place left a part: ours alone
            raise
        return True

    def walk(self, relpath: str = "") -> Iterator[tuple[str, int, int]]:
        base = self._p(relpath)
        try:
            found = self.fs.find(base, detail=True)
        except FileNotFoundError:
            return
        for name, info in found.items():
            if info.get("type") == "directory":
                continue
            rel = name[len(self.root) :].lstrip("/") if name.startswith(self.root) else name
            if rel.split("/", 1)[0].startswith(("_", ".")) and "/" in rel:
                continue
            mtime = info.get("mtime") or info.get("LastModified") or info.get("created")
            if hasattr(mtime, "timestamp"):
                mtime = mtime.timestamp()
            yield rel, int(info.get("size") or 0), int(float(mtime or 0) * 1000)


def open_store(
    location: str,
    manifest_scheme: str | None = None,
    storage_options: dict[str, Any] | None = None,
) -> Store:
    """The store of a normalized location (see ``FilesOptions.path``)."""
    if "://" not in location:
        return LocalStore(location)
    return FsspecStore(location, manifest_scheme, storage_options)
