"""Kafka as the source of the end-to-end crash tests (test_jvm_kafka_*.py): a topic of generated
records on the session's broker (kafka_broker.py), read by Spark's Kafka source
(kafka_stream.py) in a query process of its own, written by a sink, killed (SIGKILL) in the
middle of a batch; while it is down a partition is added and more records are produced; it is
started again from its checkpoint and consumes them all. Then its checkpoint is left as a crash
between the sink's commit and Spark's commit log leaves it, more records are produced, and it
runs again (the last batch replayed). An independent reader of the sink's store must see every
record exactly once: each key once with its value, each partition's offsets 0..end, none twice.

Spark's Kafka connector (3rdparty/jvm/artifacts.txt's ``kafka-spark`` set) exists for Spark
4.2.0 only, while the project runs pyspark 4.3: the query processes run pyspark 4.2.0 from
``build-support/spark-env`` (:func:`eosink.testing.reference_spark.spark_python`) ahead of the
project's own on their path, with the connector's jars handed to spark-submit
(``PYSPARK_SUBMIT_ARGS``); eosink and its sinks are the project's.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kafka_stream  # the query's source, run in the query's own process
import pytest
from kafka_broker import KafkaBroker

from eosink.testing.jvm import jars
from eosink.testing.killable_query import QueryJob
from eosink.testing.killed_query import QueryProcesses
from eosink.testing.reference_spark import spark_python

#: The Spark that the ``kafka-spark`` set's connector (spark-sql-kafka-0-10 4.2.0) is built for.
KAFKA_SPARK = "4.2.0"
#: The first round: three batches of ``MAX_OFFSETS`` records; the kill falls in the second.
PARTITIONS, FIRST, MAX_OFFSETS = 3, 600, 200
#: While the query is down: a fourth partition and more records on every partition; then a
#: last round after a crash between the sink's commit and Spark's.
GROWN, SECOND, THIRD = 4, 300, 150
#: The job's ``stream``: the Kafka source of kafka_stream.py.
STREAM = f"{kafka_stream.__name__}:stream"

Row = dict[str, Any]


@pytest.fixture
def kafka_spark(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory):
    """Query processes started by this test run pyspark 4.2.0 with Spark's Kafka connector:
    a folder holding only that pyspark and its py4j goes first on the path they inherit
    (:class:`~eosink.testing.killed_query.QueryProcesses` hands them this process's path), and
    the connector's jars go to spark-submit."""
    site = subprocess.run(
        [spark_python(KAFKA_SPARK), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    folder = tmp_path_factory.mktemp(f"pyspark-{KAFKA_SPARK}")
    for pattern in ("pyspark", "pyspark-*.dist-info", "py4j", "py4j-*.dist-info"):
        found = glob.glob(os.path.join(site, pattern))
        assert len(found) == 1, f"{pattern} in {site}: {found}"
        os.symlink(found[0], folder / os.path.basename(found[0]))
    paths = jars("kafka-spark")
    assert not any(" " in p for p in paths), f"spark-submit splits its arguments on spaces: {paths}"
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", f"--jars {','.join(paths)} pyspark-shell")


def records(round_: int, count: int) -> list[tuple[str, str]]:
    """``count`` generated records of round ``round_``: unique keys, values derived from them."""
    return [
        (f"r{round_}-k{i:05d}", f"value {i * 7919 % 10007} of r{round_} ü") for i in range(count)
    ]


def last_commit(checkpoint: Path) -> int:
    """The last batch in the commit log of Spark's checkpoint."""
    return max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())


def committed_ends(checkpoint: Path, topic: str) -> tuple[int, dict[int, int]]:
    """From Spark's checkpoint: the last batch in its commit log, and where that batch ended in
    each partition (its offset log: version, metadata, then the source's offsets)."""
    batch = last_commit(checkpoint)
    lines = (checkpoint / "offsets" / str(batch)).read_text().splitlines()
    ends = json.loads(lines[2])[topic]
    return batch, {int(p): int(o) for p, o in ends.items()}


def forget_last_commit(checkpoint: Path) -> int:
    """Remove the last batch from Spark's commit log (with its checksum file): the checkpoint
    as a crash between the sink's commit and Spark's leaves it. That batch's id."""
    batch = last_commit(checkpoint)
    (checkpoint / "commits" / str(batch)).unlink()
    (checkpoint / "commits" / f".{batch}.crc").unlink(missing_ok=True)
    return batch


def assert_held(rows: list[Row], produced: list[tuple[str, str]], ends: dict[int, int]) -> None:
    """``rows`` (read back from the sink's store) are exactly the records at offsets
    ``0..ends[p]`` of each partition, each once, with the key and value produced."""
    twice = [key for key, n in Counter(r["key"] for r in rows).items() if n > 1]
    assert not twice, f"duplicated: {twice[:5]}"
    values = dict(produced)
    wrong = [r for r in rows if values.get(r["key"]) != r["value"]]
    assert not wrong, f"rows whose key and value were not produced: {wrong[:3]}"
    offsets: dict[int, list[int]] = {}
    for r in rows:
        offsets.setdefault(int(r["kafka_partition"]), []).append(int(r["kafka_offset"]))
    held = {p: sorted(o) for p, o in offsets.items()}
    expected = {p: list(range(end)) for p, end in ends.items() if end}
    lost = {p: sorted(set(expected.get(p, [])) - set(held.get(p, [])))[:5] for p in expected}
    assert held == expected, f"lost offsets (first few): {lost}"


def killed_and_restarted(
    broker: KafkaBroker,
    work: Path,
    job: Callable[[dict[str, Any], dict[str, Any]], QueryJob],
    read: Callable[[], list[Row]],
) -> None:
    """The scenario: ``job(params, stall)`` is the test's query, ``read()`` its store's rows."""
    topic = f"events-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, PARTITIONS)
    produced = records(1, FIRST)
    first_ends = broker.produce(topic, produced)
    assert sum(first_ends.values()) == FIRST and all(first_ends.values()), first_ends
    # Batch 1 of 0..2 holds the middle third of each partition (Spark splits
    # maxOffsetsPerTrigger across partitions in proportion to what each has to read).
    stall = {"kafka_partition": 0, "kafka_offset": first_ends[0] // 2}
    params = {
        "bootstrap": broker.bootstrap,
        "topic": topic,
        "max_offsets": MAX_OFFSETS,
        "spark": KAFKA_SPARK,
    }

    with QueryProcesses(work) as queries:
        queries.kill_mid_batch(job(params, stall))
        batch, ends = committed_ends(work / "ckpt", topic)
        assert (work / "ckpt" / "offsets" / str(batch + 1)).exists()  # the killed batch
        assert batch >= 0 and ends[0] <= stall["kafka_offset"], (batch, ends, stall)
        assert_held(read(), produced, ends)  # the committed batches, nothing of the killed one

        # While the query is down: a partition more, and new records on every partition. The
        # restart replays the killed batch as its offset log has it, then reads the rest in one
        # batch (a new maxOffsetsPerTrigger applies to new batches only).
        broker.grow_topic(topic, GROWN)
        produced += records(2, SECOND)
        grown_ends = broker.produce(topic, produced[FIRST:])
        assert grown_ends[GROWN - 1] > 0, grown_ends  # the new partition got records too
        rest = job({**params, "max_offsets": 10**6}, stall)
        queries.restart(rest)
        assert_held(read(), produced, grown_ends)

        # A crash after the sink committed its last batch and before Spark's commit log
        # recorded it: Spark runs that batch again, the sink must skip it; then new records.
        last = forget_last_commit(work / "ckpt")
        produced += records(3, THIRD)
        final_ends = broker.produce(topic, produced[FIRST + SECOND :])
        queries.restart(rest)
        commits = work / "ckpt" / "commits"
        assert (commits / str(last)).exists() and (commits / str(last + 1)).exists()
    assert sum(final_ends.values()) == FIRST + SECOND + THIRD, final_ends
    assert_held(read(), produced, final_ends)
