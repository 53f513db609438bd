"""The store of a URL path: any fsspec filesystem (``memory://``, S3, GCS, Azure, ...).

:mod:`eosink_files.store` says what every store does and how each publishes a file only if
it is absent; this is its fsspec half: exclusive create (``"xb"``) where the object store
makes it atomic (:data:`eosink_files.store.CONDITIONAL_CREATE`), a process-wide lock for
``memory://``, the access probe, listings and the batched size checks of the commit.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from eosink.plugin import ConfigurationError, clock
from eosink.options import MASK, secret_values
from eosink_files.store import (
    CONDITIONAL_CREATE,
    HEAD_CONCURRENCY,
    PROBE_DIR,
    Data,
    Store,
    _memory_lock,
    _write_whole,
    chunks,
    safe_url,
    spark_root_uri,
)


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

    def access_refusal(self, exc: BaseException) -> str | None:
        if self.protocol == "memory" or isinstance(exc, (ValueError, TypeError)):
            return None
        return self._access_error(safe_url(self.location), exc)

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
