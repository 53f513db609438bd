"""A torn log file is never taken for a complete one.

In ``single_writer`` mode the filesystem cannot publish a file atomically, so a crash may leave
any prefix of a log file behind. A prefix that ends on a line boundary is valid JSON lines: if
it held the proof but not all the files, the replay would be skipped and rows lost. A log file
counts only when its closing line is there; the replay then rewrites the torn file.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest
from eosink_files import ManifestError, read_table
from eosink_files.log_view import forget_views
from eosink_files.sink import FilesSink
from files_helpers import rows, run

from eosink import BatchContext
from eosink.registry import plugin_manager


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
