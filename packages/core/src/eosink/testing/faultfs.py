"""An object store in memory, behind fsspec, that fails where a test tells it to.

The kit's simulation injects store faults *below* the sink: the sink talks to a real fsspec
filesystem (``faulty://<store>/<path>``) and cannot tell it from S3, except that a test can
make its Nth request fail. It behaves as an object store does, as far as fsspec shows it:

* a write is buffered and lands whole when the file is closed (one PUT), with the modification
  time of :func:`eosink.clock.now`; ``"xb"`` is a conditional create, decided atomically, as
  S3's ``If-None-Match: *``; fsspec's buffered files close (and so upload) on ``__exit__`` even
  when the ``with`` block raised, exactly as s3fs's do;
* folders are only key prefixes; a rename is a copy and a delete;
* every call that would be a request (HEAD, GET, LIST, PUT, DELETE, COPY) is counted, and a
  test arms faults (:class:`StoreFault`) that fire at a given request: an ``error`` (nothing
  happens, the client sees an error), a ``lost_reply`` (the request is carried out, then the
  client sees an error) or a ``short_write`` (a PUT cut short: nothing lands on an object
  store; the first half lands on a store made with ``atomic_writes=False``, a filesystem
  without atomic publication).

Each store is named by the first component of its paths and lives in this process::

    store = ObjectStore.create()                 # faulty://<store.name>/...
    store.arm(StoreFault("lost_reply", after=3, ops=("put",)))
    fs, root = fsspec.core.url_to_fs(store.url("out"))
"""

from __future__ import annotations

import io
import re
import threading
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, Protocol, TypeVar

import attrs
from fsspec import register_implementation
from fsspec.spec import AbstractBufferedFile, AbstractFileSystem

from eosink import clock

PROTOCOL = "faulty"
Op = Literal["head", "get", "list", "put", "delete", "copy"]
OPS: tuple[Op, ...] = ("head", "get", "list", "put", "delete", "copy")
FaultKind = Literal["error", "lost_reply", "short_write"]
T = TypeVar("T")


class InjectedStoreFault(OSError):
    """A store request failed because a test said so."""


@attrs.define
class StoreFault:
    """Fail the ``after``-th matching request from now (1: the next one).

    ``ops`` and ``path`` (a regular expression searched in the object's key) narrow which
    requests count. A ``short_write`` of a request that is not a PUT fails like an ``error``.
    """

    kind: FaultKind
    after: int = 1
    ops: tuple[Op, ...] = OPS
    path: str = ""
    seen: int = 0

    def matches(self, op: Op, key: str) -> bool:
        return op in self.ops and (not self.path or re.search(self.path, key) is not None)


class FaultTarget(Protocol):
    """What the kit's simulation needs of a store it injects faults into: an
    :class:`ObjectStore`, or an adapter of another store's own fault injector (the loopback
    S3 server's: :class:`eosink.testing.s3.S3FaultTarget`).

    ``fired`` lists every fault fired since the target was made, and only grows (also across
    :meth:`disarm`): the simulation compares its length before and after a step to tell an
    injected failure from a real one.
    """

    @property
    def fired(self) -> Sequence[Any]:
        ...

    def arm(self, *faults: StoreFault) -> None:
        ...

    def disarm(self) -> Any:
        ...


@attrs.define
class FiredFault:
    kind: FaultKind
    op: Op
    key: str
    request: int


class ArmedFaults:
    """The arming half of a :class:`FaultTarget` that decides faults itself: the armed faults
    in ``faults``, guarded by ``lock`` (both the subclass's), which its requests consult."""

    lock: Any
    faults: list[StoreFault]

    def arm(self, *faults: StoreFault) -> None:
        with self.lock:
            self.faults.extend(faults)

    def disarm(self) -> list[StoreFault]:
        """Remove every armed fault; returns those that never fired."""
        with self.lock:
            left, self.faults = self.faults, []
            return left


@attrs.define(eq=False)
class ObjectStore(ArmedFaults):
    """The objects of one store, its request counter and its armed faults."""

    name: str
    atomic_writes: bool = True
    objects: dict[str, tuple[bytes, float]] = attrs.field(factory=dict)
    faults: list[StoreFault] = attrs.field(factory=list)
    fired: list[FiredFault] = attrs.field(factory=list)
    requests: int = 0
    lock: threading.RLock = attrs.field(factory=threading.RLock)

    @classmethod
    def create(cls, *, atomic_writes: bool = True) -> ObjectStore:
        """A new empty store, registered under a fresh name."""
        store = cls(f"store-{uuid.uuid4().hex[:12]}", atomic_writes)
        with _registry_lock:
            _stores[store.name] = store
        return store

    def drop(self) -> None:
        """Forget the store (its objects go with it)."""
        with _registry_lock:
            _stores.pop(self.name, None)

    def url(self, path: str = "") -> str:
        return f"{PROTOCOL}://{self.name}" + (f"/{path.strip('/')}" if path else "")

    # -- faults ----------------------------------------------------------------------------
    def request(
        self, op: Op, key: str, action: Callable[[], T], partial: Callable[[], Any] | None = None
    ) -> T:
        """Carry out one request, unless an armed fault says otherwise."""
        with self.lock:
            self.requests += 1
            fault = self._due(op, key)
            if fault is None:
                return action()
            self.fired.append(FiredFault(fault.kind, op, key, self.requests))
            what = f"injected {fault.kind} on {op.upper()} {key} (request {self.requests})"
            if fault.kind == "lost_reply":
                action()
                raise InjectedStoreFault(f"{what}: the request was carried out, its reply lost")
            if fault.kind == "short_write" and op == "put" and partial is not None:
                if not self.atomic_writes:
                    partial()
                raise InjectedStoreFault(f"{what}: the upload was cut short")
            raise InjectedStoreFault(what)

    def _due(self, op: Op, key: str) -> StoreFault | None:
        for fault in self.faults:
            if fault.matches(op, key):
                fault.seen += 1
                if fault.seen >= fault.after:
                    self.faults.remove(fault)
                    return fault
        return None

    # -- objects ---------------------------------------------------------------------------
    def put(self, key: str, data: bytes) -> None:
        self.objects[key] = (data, clock.now())

    def keys_under(self, prefix: str) -> Iterable[str]:
        prefix = prefix.rstrip("/") + "/"
        return [k for k in self.objects if k.startswith(prefix)]


_stores: dict[str, ObjectStore] = {}
_registry_lock = threading.Lock()


def store_of(path: str) -> ObjectStore:
    name = path.split("/", 1)[0]
    with _registry_lock:
        store = _stores.get(name)
    if store is None:
        raise FileNotFoundError(f"no such bucket: {name!r}")
    return store


class FaultyFile(AbstractBufferedFile):
    """A buffered file of :class:`FaultyFileSystem`: one GET per read range, one PUT on close."""

    fs: FaultyFileSystem

    def _fetch_range(self, start: int, end: int) -> bytes:
        return self.fs.cat_file(self.path, start=start, end=end)

    def _initiate_upload(self) -> None:
        self.parts = io.BytesIO()

    def _upload_chunk(self, final: bool = False) -> bool:
        self.buffer.seek(0)
        self.parts.write(self.buffer.read())
        if final:
            self.fs._put(self.path, self.parts.getvalue(), exclusive=self.mode == "xb")
        return True


class FaultyFileSystem(AbstractFileSystem):
    """fsspec's view of the :class:`ObjectStore` s of this process (``faulty://``)."""

    protocol = PROTOCOL
    root_marker = ""
    #: ``open(path, "xb")`` is a conditional create decided by the store, as S3's.
    exclusive_create_is_atomic = True

    @classmethod
    def _strip_protocol(cls, path: str) -> str:
        if path.startswith(f"{PROTOCOL}://"):
            path = path[len(PROTOCOL) + 3 :]
        return path.rstrip("/")

    # -- requests --------------------------------------------------------------------------
    def _put(self, path: str, data: bytes, exclusive: bool = False) -> None:
        key = self._strip_protocol(path)
        store = store_of(key)

        def put() -> None:
            if exclusive and key in store.objects:
                raise FileExistsError(key)
            store.put(key, data)

        store.request("put", key, put, partial=lambda: store.put(key, data[: len(data) // 2]))

    def cat_file(self, path: str, start: int | None = None, end: int | None = None, **kw: Any):
        key = self._strip_protocol(path)
        store = store_of(key)

        def get() -> bytes:
            if key not in store.objects:
                raise FileNotFoundError(key)
            return store.objects[key][0][start:end]

        return store.request("get", key, get)

    def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        key = self._strip_protocol(path)
        store = store_of(key)

        def head() -> dict[str, Any]:
            if key in store.objects:
                data, mtime = store.objects[key]
                return {"name": key, "size": len(data), "type": "file", "mtime": mtime}
            if key == store.name or store.keys_under(key):
                return {"name": key, "size": 0, "type": "directory"}
            raise FileNotFoundError(key)

        return store.request("head", key, head)

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> list[Any]:
        key = self._strip_protocol(path)
        store = store_of(key)

        def listing() -> list[dict[str, Any]]:
            if key in store.objects:
                data, mtime = store.objects[key]
                return [{"name": key, "size": len(data), "type": "file", "mtime": mtime}]
            prefix = key.rstrip("/") + "/"
            files, folders = [], set()
            for k in store.keys_under(key):
                head, sep, _ = k[len(prefix) :].partition("/")
                if sep:
                    folders.add(prefix + head)
                else:
                    data, mtime = store.objects[k]
                    files.append({"name": k, "size": len(data), "type": "file", "mtime": mtime})
            if not files and not folders and key != store.name:
                raise FileNotFoundError(key)
            return files + [{"name": f, "size": 0, "type": "directory"} for f in sorted(folders)]

        entries = store.request("list", key, listing)
        return entries if detail else [e["name"] for e in entries]

    def rm_file(self, path: str) -> None:
        key = self._strip_protocol(path)
        store = store_of(key)
        store.request("delete", key, lambda: store.objects.pop(key, None))

    def _rm(self, path: str) -> None:
        self.rm_file(path)

    def rm(self, path: Any, recursive: bool = False, maxdepth: int | None = None) -> None:
        paths = [path] if isinstance(path, str) else list(path)
        for p in paths:
            key = self._strip_protocol(p)
            store = store_of(key)
            targets = list(store.keys_under(key)) if recursive else []
            if key in store.objects:
                targets.append(key)
            if not targets:
                raise FileNotFoundError(key)
            for target in targets:
                self.rm_file(target)

    def cp_file(self, path1: str, path2: str, **kwargs: Any) -> None:
        src, dst = self._strip_protocol(path1), self._strip_protocol(path2)
        store = store_of(src)

        def copy() -> None:
            if src not in store.objects:
                raise FileNotFoundError(src)
            store.put(dst, store.objects[src][0])

        store.request("copy", dst, copy)

    def mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        store_of(self._strip_protocol(path))  # only the bucket must exist: folders are prefixes

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        self.mkdir(path)

    def _open(
        self,
        path: str,
        mode: str = "rb",
        block_size: int | None = None,
        autocommit: bool = True,
        cache_options: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> FaultyFile:
        if mode == "xb" and self._strip_protocol(path) in store_of(path).objects:
            raise FileExistsError(path)  # s3fs asks early too; the PUT decides in the end
        return FaultyFile(self, path, mode, block_size or 5 << 20, autocommit, **kwargs)

    def created(self, path: str) -> Any:
        return self.info(path).get("mtime")

    def modified(self, path: str) -> Any:
        return self.info(path).get("mtime")


register_implementation(PROTOCOL, FaultyFileSystem, clobber=True)
