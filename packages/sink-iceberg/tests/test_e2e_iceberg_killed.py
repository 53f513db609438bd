"""End to end with a real kill: the driver process gets SIGKILL in the middle of a batch.

One task of the batch has written its Parquet file into the table's data folder, the other
stalls; the whole process group is killed; the query is started again from the same
checkpoint. The table, read by pyiceberg and by DuckDB's iceberg extension, holds exactly the
source rows; the proof property says batch 3; the killed attempt's file is an orphan no
snapshot lists, which ``eosink cleanup iceberg`` finds (dry run), then removes.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import killable_query  # the query the test runs in its own process
import pytest
from eosink_iceberg.proof import StoredProof, property_key
from iceberg_helpers import duckdb_missing, load, read_duckdb, read_pyiceberg

from eosink import cli

FILES, ROWS_PER_FILE = 4, 300


def start(work, door):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.Popen(
        [sys.executable, "-m", killable_query.__name__, str(work), door],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(os.path.join(work, f"query-{time.monotonic_ns()}.log"), "w"),
        start_new_session=True,
    )


def proof_batch(catalog) -> int:
    text = load(catalog, killable_query.TABLE).metadata.properties[property_key("orders")]
    return StoredProof.from_json(text).proof.batch_id


def data_files(work) -> set[str]:
    folder = os.path.join(work, "warehouse")
    return {n for _, _, names in os.walk(folder) for n in names if n.endswith(".parquet")}


@pytest.mark.parametrize("door", ["foreach_batch", "data_source"])
def test_query_killed_mid_batch_and_restarted(tmp_path, door, iceberg_entry_point, capsys):
    os.makedirs(tmp_path / "in")
    expected = []
    for n in range(FILES):
        with open(tmp_path / "in" / f"part-{n}.json", "w") as f:
            for i in range(ROWS_PER_FILE):
                ts = dt.datetime(2024, 1, 1 + n, i % 24).isoformat()
                f.write(json.dumps({"id": n * 1000 + i, "name": f"r{n}-{i}", "ts": ts}) + "\n")
                expected.append(n * 1000 + i)
        stamp = time.time() - 100 + n
        os.utime(tmp_path / "in" / f"part-{n}.json", (stamp, stamp))
    (tmp_path / "armed").touch()
    query = start(tmp_path, door)
    deadline = time.monotonic() + 240
    while not (tmp_path / "reached").exists():
        assert query.poll() is None, "the query ended before reaching the stalled batch"
        assert time.monotonic() < deadline, "the query never reached the stalled batch"
        time.sleep(0.2)
    time.sleep(2)  # the other task of the batch finishes writing its files
    os.killpg(query.pid, signal.SIGKILL)
    query.wait()
    catalog = killable_query.catalog(str(tmp_path))
    assert proof_batch(catalog) == 1
    on_disk_before = data_files(tmp_path)
    (tmp_path / "armed").unlink()
    restarted = start(tmp_path, door)
    assert restarted.wait(timeout=300) == 0
    readers = [read_pyiceberg] + ([read_duckdb] if duckdb_missing() is None else [])
    for read in readers:
        held = Counter(read(catalog, killable_query.TABLE).column("id").to_pylist())
        assert sorted(held.elements()) == sorted(expected), read.__name__
    assert proof_batch(catalog) == FILES - 1
    table = load(catalog, killable_query.TABLE)
    listed = {t.file.file_path.rsplit("/", 1)[-1] for t in table.scan().plan_files()}
    orphans = on_disk_before - listed
    assert orphans, "the killed attempt left its written file behind"
    # the operator's cleanup: a dry run lists the orphans, --delete removes them, reads unchanged
    command = ["cleanup", "iceberg", killable_query.TABLE, "--older-than", "0s"]
    for key, value in catalog.items():
        command += ["-o", f"catalog.{key}={value}"]
    assert cli.main(command) == 0
    dry = capsys.readouterr().out
    assert all(name in dry for name in orphans), dry
    assert data_files(tmp_path) >= orphans
    assert cli.main([*command, "--delete"]) == 0
    assert not data_files(tmp_path) & orphans
    held = read_pyiceberg(catalog, killable_query.TABLE).column("id").to_pylist()
    assert sorted(held) == sorted(expected)
