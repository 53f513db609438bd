"""eosink's logs in a real local Spark job: executor-side events honour the level the driver
configured, and nothing of eosink's reaches the job's stdout.

Spark's Python workers never run the driver's logging set-up; eosink ships it inside the write
tasks. The session is started *before* ``configure_logging``, so the workers' environment
(inherited from the JVM) cannot carry it: only the pickled tasks do. The job runs in a process
of its own, as a user's would, so that its stdout and stderr are the job's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

JOB = """
import logging, sys
import eosink
from eosink.testing.spark import local_spark
from eosink_files.sink import FilesSink

out = sys.argv[1]
spark = local_spark(2)  # before any logging set-up: the workers' environment holds none
df = spark.range(0, 40, 1, 2)

def batch(version, marker):
    print(marker, flush=True)
    print(marker, file=sys.stderr, flush=True)
    sink = FilesSink(path=out, file_writer="arrow")  # Python writes on the executors
    outcome = eosink.write_batch(df, sink, writer_id="logs", version=version)
    print("result:", version, [o.status for o in outcome], flush=True)

batch(1, "== unconfigured")
eosink.configure_logging(json=True, level=logging.DEBUG)
batch(2, "== debug")
eosink.configure_logging(json=True, level=logging.WARNING)
batch(3, "== warning")
spark.stop()
"""


def sections(text: str) -> dict[str, list[str]]:
    """The job's output lines by the marker line they follow."""
    found: dict[str, list[str]] = {"start": []}
    current = "start"
    for line in text.splitlines():
        if line.startswith("== "):
            current = line[3:]
            found[current] = []
        else:
            found[current].append(line)
    return found


def events(lines: list[str]) -> list[dict]:
    """eosink's JSON events among the lines (Spark's own lines are not JSON)."""
    parsed = []
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and "event" in event:
            parsed.append(event)
    return parsed


def test_executor_events_honour_the_driver_level_and_stdout_stays_the_jobs(tmp_path: Path):
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("EOSINK_LOG")},
        # absolute: the job runs in another folder (test runners put relative entries here)
        "PYTHONPATH": os.pathsep.join(os.path.abspath(p) for p in sys.path if p),
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    done = subprocess.run(
        [sys.executable, "-c", JOB, str(tmp_path / "out")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-6000:]
    out = sections(done.stdout)
    assert out == {
        "start": [],
        "unconfigured": ["result: 1 ['committed']"],
        "debug": ["result: 2 ['committed']"],
        "warning": ["result: 3 ['committed']"],
    }, done.stdout

    err = sections(done.stderr)
    # Nobody configured logging: Python drops eosink's INFO and DEBUG events.
    assert events(err["unconfigured"]) == [], err["unconfigured"]
    # DEBUG on the driver: the executors' write phases (one per partition) are logged, by
    # processes other than the driver.
    debug = events(err["debug"])
    writes = [e for e in debug if e["event"] == "phase.write"]
    assert sorted(e["partition"] for e in writes) == [0, 1], debug
    assert all(e["level"] == "debug" and e["batch"] == 2 for e in writes)
    assert any(e["event"] == "batch.committed" for e in debug)  # the driver's own
    # WARNING on the driver: the same workers now log nothing below it.
    assert events(err["warning"]) == [], err["warning"]
