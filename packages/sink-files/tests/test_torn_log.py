"""A torn log file is never taken for a complete one, nor published.

In ``single_writer`` mode the filesystem cannot publish a file atomically, so a crash may leave
any prefix of a log file behind. A prefix that ends on a line boundary is valid JSON lines: if
it held the proof but not all the files, the replay would be skipped and rows lost. A log file
counts only when its closing line is there; the replay then rewrites the torn file.

Elsewhere a log file cut short is damage: refused with an error naming it, by a process that
read it before as by a new one. And a log file whose content fails part-way while it is
written (a compaction streams the previous compact) is never published.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest
from eosink_files import ManifestError, committed_files, read_table
from eosink_files.log import LOG_DIR
from eosink_files.log_view import TAIL_CHUNK, forget_views
from eosink_files.sink import FilesSink
from eosink_files.fsspec_store import FsspecStore
from eosink_files.store import LocalStore
from files_helpers import rows, run

from eosink.plugin import BatchContext
from eosink.registry import plugin_manager


@pytest.fixture
def memory_here(memory_url, monkeypatch):
    """A memory:// folder for runs that write in this process (LocalRunner), accepted even
    when a Spark session of other tests is alive in it."""
    monkeypatch.setattr("eosink_files.sink.in_spark_application", lambda: False)
    return memory_url


def expected_ids(batches):
    return sorted(i for b in batches for p in range(2) for i in rows(b, p).column("id").to_pylist())


def prefixes(data: bytes):
    """Every prefix of ``data`` that ends on a line boundary, with and without the newline."""
    lines = data.split(b"\n")
    for k in range(len(lines)):
        head = b"\n".join(lines[:k])
        yield f"{k}-lines", head
        if k:
            yield f"{k}-lines-newline", head + b"\n"


def committed_batch(out, batch_id):
    sink = FilesSink(path=out, single_writer=True)
    ctx = BatchContext("files", "w", batch_id, query_id="q1")
    return plugin_manager(sink).hook.is_committed(ctx=ctx)


@pytest.mark.parametrize(("last", "name"), [(4, "4"), (9, "9.compact")], ids=["delta", "compact"])
def test_truncated_log_file_at_every_line_boundary(tmp_path, last, name):
    template = tmp_path / "template"
    for b in range(last + 1):
        run(FilesSink(path=str(template), single_writer=True), b)
    data = (template / "_spark_metadata" / name).read_bytes()
    assert data.count(b"\n") >= 3
    for label, torn in prefixes(data):
        out = tmp_path / label
        for b in range(last + 1):
            run(FilesSink(path=str(out), single_writer=True), b)
        log_file = out / "_spark_metadata" / name
        complete = log_file.read_bytes()
        log_file.write_bytes(torn if torn.strip(b"\n") != complete.strip(b"\n") else complete)
        forget_views()  # the crash that tore the file ended the writer's process
        whole = torn.strip(b"\n") == complete.strip(b"\n")
        proof = committed_batch(str(out), last)
        assert (proof is not None and proof.batch_id == last) == whole, label
        outcome = run(FilesSink(path=str(out), single_writer=True), last)  # the replay
        assert outcome.status == ("skipped" if whole else "committed"), label
        held = Counter(read_table(str(out)).column("id").to_pylist())
        assert sorted(held.elements()) == expected_ids(range(last + 1)), label
        assert run(FilesSink(path=str(out), single_writer=True), last + 1).status == "committed"


def test_torn_log_file_without_single_writer_is_reported(tmp_path):
    out = tmp_path / "out"
    run(FilesSink(path=str(out)), 0)
    log_file = out / "_spark_metadata" / "0"
    lines = log_file.read_bytes().split(b"\n")
    log_file.write_bytes(b"\n".join(lines[:2]))  # the version line and the proof
    forget_views()
    with pytest.raises(ManifestError, match="0 is damaged.*does not end with its closing line"):
        run(FilesSink(path=str(out)), 0)
    assert os.path.exists(log_file)


# -- a damaged latest log file is refused, also by a process that read it before ------------------
def cut_mid_line(data: bytes, lines_from_end: int) -> bytes:
    """``data`` cut in the middle of its ``lines_from_end``-th line from the end (1: the last)."""
    lines = data.rstrip(b"\n").split(b"\n")
    line = lines[-lines_from_end]
    return b"\n".join([*lines[:-lines_from_end], line[: len(line) // 2]])


@pytest.mark.parametrize("process", ["same", "fresh"])
@pytest.mark.parametrize(("last", "name"), [(4, "4"), (9, "9.compact")], ids=["delta", "compact"])
@pytest.mark.parametrize("cut", [1, 2], ids=["closing-line", "last-file-entry"])
def test_damaged_latest_log_file_is_refused(tmp_path, process, last, name, cut):
    """Someone cuts the latest log file in the middle of a line. Spark's reader fails on the
    folder from then on: the next batch must fail too, naming the file, never commit on top
    of it, whether its process read the file before (and keeps its view) or not."""
    out = str(tmp_path / "out")
    for b in range(last + 1):
        run(FilesSink(path=out), b)
    log_dir = os.path.join(out, LOG_DIR)
    log_file = os.path.join(log_dir, name)
    with open(log_file, "rb") as f:
        damaged = cut_mid_line(f.read(), cut)
    with open(log_file, "wb") as f:
        f.write(damaged)
    if process == "fresh":
        forget_views()
    before = sorted(os.listdir(log_dir))
    for _ in range(2):  # and again: the error stays until the file is restored
        with pytest.raises(ManifestError, match=f"{LOG_DIR}/{name} is damaged.*Restore the file"):
            run(FilesSink(path=out), last + 1)
    assert sorted(os.listdir(log_dir)) == before


def test_latest_log_file_that_lost_a_line_is_refused(tmp_path):
    """A line removed from the middle: the file still ends with its closing line, but it is
    not the file that was published."""
    out = str(tmp_path / "out")
    for b in range(2):
        run(FilesSink(path=out), b)
    log_file = os.path.join(out, LOG_DIR, "1")
    with open(log_file, "rb") as f:
        lines = f.read().split(b"\n")
    with open(log_file, "wb") as f:
        f.write(b"\n".join(lines[:2] + lines[3:]))  # one of the two file entries
    with pytest.raises(ManifestError, match=f"{LOG_DIR}/1 is damaged: it has .* bytes, not the"):
        run(FilesSink(path=out), 2)


@pytest.mark.parametrize("keep", ["most", "little"])
@pytest.mark.parametrize("where", ["memory", "s3"])
def test_damaged_latest_log_file_is_refused_on_fsspec_stores(memory_here, request, where, keep):
    """The same through fsspec, where the latest file's last bytes are read along with the
    probes of the next ids, in one round trip; ``little``: the file is cut below the offset
    those bytes are asked from (an object store refuses that range)."""
    if where == "s3":
        bucket = request.getfixturevalue("s3_bucket")
        out, opts = bucket.uri("out"), bucket.endpoint.fsspec_options()
    else:
        out, opts = memory_here, None
    run(FilesSink(path=out, storage_options=opts), 0)
    parts = [[rows(1, p, n=1)] for p in range(30)]  # a log file larger than the tail read
    run(FilesSink(path=out, storage_options=opts), 1, parts)
    store = FilesSink(path=out, storage_options=opts)._store()
    path = store._p(f"{LOG_DIR}/1")
    data = store.fs.cat_file(path)
    assert len(data) > TAIL_CHUNK + 1000
    store.fs.pipe_file(path, cut_mid_line(data, 1) if keep == "most" else data[:1000])
    with pytest.raises(ManifestError, match=f"{LOG_DIR}/1 is damaged.*closing line"):
        run(FilesSink(path=out, storage_options=opts), 2)
    assert sorted(name for name, _ in store.listdir(LOG_DIR) if name[0].isdigit()) == ["0", "1"]


# -- a compaction whose source fails publishes nothing -------------------------------------------
class FailingRead:
    """A file being read that breaks off (a connection reset) once ``limit`` bytes were read."""

    def __init__(self, f, limit: int) -> None:
        self.f, self.left = f, limit

    def seek(self, *args):
        return self.f.seek(*args)

    def read(self, size=-1):
        if self.left <= 0:
            raise ConnectionResetError("connection reset while reading the previous compact")
        data = self.f.read(self.left if size < 0 else min(size, self.left))
        self.left -= len(data)
        return data

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()


def break_reads_of(monkeypatch, name: str, limit: int, store=FsspecStore) -> None:
    """Reads of log file ``name`` break off after ``limit`` bytes (the compaction's source)."""
    open_read = store.open_read

    def failing(self, relpath):
        f = open_read(self, relpath)
        return FailingRead(f, limit) if relpath == f"{LOG_DIR}/{name}" else f

    monkeypatch.setattr(store, "open_read", failing)


def log_keys(bucket) -> list[str]:
    listing = bucket.endpoint.client().list_objects_v2(Bucket=bucket.name, Prefix=f"out/{LOG_DIR}/")
    return sorted(o["Key"].rsplit("/", 1)[-1] for o in listing.get("Contents", []))


def s3_files_sink(bucket) -> FilesSink:
    return FilesSink(
        path=bucket.uri("out"), storage_options=bucket.endpoint.fsspec_options(), compact_interval=3
    )


def test_compaction_whose_source_breaks_off_publishes_nothing_on_s3(s3_bucket, monkeypatch):
    """The previous compact's read fails after the new compact's first bytes were written:
    the object store must not receive a truncated compact (s3fs uploads what it buffered when
    the file is closed), which every writer would then refuse for good."""
    for b in range(5):  # ids 0, 1, 2.compact, 3, 4
        assert run(s3_files_sink(s3_bucket), b).status == "committed"
    break_reads_of(monkeypatch, "2.compact", limit=100)
    with pytest.raises(ConnectionResetError):
        run(s3_files_sink(s3_bucket), 5)  # a compact at id 5
    assert "5.compact" not in log_keys(s3_bucket)
    monkeypatch.undo()
    assert run(s3_files_sink(s3_bucket), 5).status == "committed"  # the replay
    assert run(s3_files_sink(s3_bucket), 6).status == "committed"
    opts = s3_bucket.endpoint.fsspec_options()
    held = read_table(s3_bucket.uri("out"), compact_interval=3, storage_options=opts)
    assert sorted(held.column("id").to_pylist()) == expected_ids(range(7))


def test_multipart_compaction_whose_source_breaks_off_is_aborted_on_s3(s3_bucket, monkeypatch):
    """The same with a compact larger than s3fs's 5 MiB block: the parts already uploaded
    belong to a multipart upload that must be aborted, never completed."""
    from eosink.model import Proof
    from eosink_files.log import FileEntry, render
    from eosink_files.proof import ProofEntry, closing_line

    opts = s3_bucket.endpoint.fsspec_options()
    store = FsspecStore(s3_bucket.uri("out"), storage_options=opts)
    log_uri = store.uri(LOG_DIR)
    proofs = [
        ProofEntry(Proof("w", b, "q1", rows=8), f"{b:032x}", b, "parquet", (), "append")
        for b in range(3)
    ]
    entries = [
        FileEntry(store.uri(f"part-{i:05d}-{i:032x}-{i}-c000.snappy.parquet"), 1000, 0).to_line()
        for i in range(30_000)
    ]
    big = render([p.to_line(log_uri) for p in proofs], entries, b"", closing_line(2, log_uri))
    assert len(big) > 6 << 20
    store.fs.pipe_file(store._p(f"{LOG_DIR}/2.compact"), big)  # a history of 30,000 files
    for b in range(3, 5):
        assert run(s3_files_sink(s3_bucket), b).status == "committed"
    break_reads_of(monkeypatch, "2.compact", limit=6 << 20)  # past one 5 MiB part
    with pytest.raises(ConnectionResetError):
        run(s3_files_sink(s3_bucket), 5)
    assert "5.compact" not in log_keys(s3_bucket)
    client = s3_bucket.endpoint.client()
    assert not client.list_multipart_uploads(Bucket=s3_bucket.name).get("Uploads")
    monkeypatch.undo()
    assert run(s3_files_sink(s3_bucket), 5).status == "committed"
    listed = committed_files(s3_bucket.uri("out"), compact_interval=3, storage_options=opts)
    assert len(listed) == 30_000 + 3 * 2


@pytest.mark.parametrize("where", ["local", "memory", "local-single-writer"])
def test_compaction_whose_source_breaks_off_publishes_nothing(tmp_path, memory_here, where):
    """The other ways of publishing: a temporary file linked to its name, the memory store."""
    out = memory_here if where == "memory" else str(tmp_path / "out")
    single = where.endswith("single-writer")

    def sink():
        return FilesSink(path=out, compact_interval=3, single_writer=single)

    for b in range(5):
        assert run(sink(), b).status == "committed"
    with pytest.MonkeyPatch.context() as patch:
        store = FsspecStore if where == "memory" else LocalStore
        break_reads_of(patch, "2.compact", limit=100, store=store)
        with pytest.raises(ConnectionResetError):
            run(sink(), 5)
    store = sink()._store()
    assert "5.compact" not in {name for name, _ in store.listdir(LOG_DIR)}
    assert run(sink(), 5).status == "committed"
    assert sorted(read_table(out, compact_interval=3).column("id").to_pylist()) == expected_ids(
        range(6)
    )
