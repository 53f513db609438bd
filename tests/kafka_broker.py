"""A single-node Kafka broker on loopback for tests: KRaft mode (broker and controller in one
JVM), the jars of 3rdparty/jvm/artifacts.txt's ``kafka-broker`` set (fetched on first use by
``build-support/jvm-jars``), a temporary log dir, free ports, stopped at the end of the session.

Topics and records go through Kafka's own clients (``kafka-clients`` of the same jars), run by
the small Java program ``KafkaTopics.java`` beside this module (compiled once per broker, while
it starts; one JVM per call, ~2 s): the records a test produces are acknowledged by the broker
(``acks=all``, idempotent producer) before :meth:`KafkaBroker.produce` returns.

    def test_x(kafka_broker):
        kafka_broker.create_topic("events", partitions=3)
        ends = kafka_broker.produce("events", [("k1", "v1"), ("k2", "v2")])
        spark.readStream.format("kafka").option("kafka.bootstrap.servers", kafka_broker.bootstrap)

The broker writes no log of its own (the set has no SLF4J binding); a broker that exits or does
not listen in time is an error with its exit code and output.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs
import pytest

from eosink.testing.jvm import jars

HOST = "127.0.0.1"
#: The Java program of the topic and record calls (one source file).
CLIENT = Path(__file__).resolve().parent / "KafkaTopics.java"
JDK_HINT = "the Kafka tests run a broker and compile KafkaTopics.java: they need a JDK 17+"
#: Small JVMs that start fast: the broker serves a few thousand records.
JVM_OPTIONS = (
    "-Xmx512m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Djava.awt.headless=true",
)
START_TIMEOUT_S = 90.0
CALL_TIMEOUT_S = 120.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes in URL-safe base64, never starting with ``-`` (a
    command line would read it as an option), as Kafka's ``Uuid.randomUuid()``."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def server_properties(port: int, controller_port: int, log_dir: str) -> str:
    """One process as broker and controller, loopback only, replication factor 1 everywhere."""
    settings = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@{HOST}:{controller_port}",
        "listeners": f"PLAINTEXT://{HOST}:{port},CONTROLLER://{HOST}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{port}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": log_dir,
        "auto.create.topics.enable": "false",
        "num.network.threads": "2",
        "num.io.threads": "2",
        "offsets.topic.num.partitions": "1",
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.num.partitions": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
    }
    return "".join(f"{key}={value}\n" for key, value in settings.items())


@attrs.frozen
class KafkaBroker:
    """A running broker: where it listens, and Kafka's clients against it."""

    bootstrap: str
    #: The broker's jars and the compiled KafkaTopics.
    classpath: str = attrs.field(repr=False)

    def call(self, *args: str, records: str | None = None) -> str:
        """Run ``KafkaTopics <bootstrap> <args>`` (``records`` on its stdin); its stdout."""
        done = subprocess.run(
            [
                jdk_tool("java"),
                *JVM_OPTIONS,
                "-cp",
                self.classpath,
                "KafkaTopics",
                self.bootstrap,
                *args,
            ],
            input=records,
            capture_output=True,
            encoding="utf-8",  # KafkaTopics reads its records as UTF-8
            errors="replace",
            timeout=CALL_TIMEOUT_S,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"KafkaTopics {' '.join(args)} failed (exit {done.returncode}):\n"
                f"{done.stderr[-3000:]}"
            )
        return done.stdout

    def create_topic(self, topic: str, partitions: int) -> None:
        self.call("create", topic, str(partitions))

    def grow_topic(self, topic: str, partitions: int) -> None:
        """Add partitions to ``topic`` up to ``partitions`` in all."""
        self.call("partitions", topic, str(partitions))

    def produce(self, topic: str, records: Iterable[tuple[str, str]]) -> dict[int, int]:
        """Send ``(key, value)`` records, partitioned by key, and wait for every ack; then the
        topic's end offsets (:meth:`end_offsets`)."""
        lines = []
        for key, value in records:
            if any(c in text for text in (key, value) for c in "\t\n\r"):
                raise ValueError(f"a record's key and value are one line without tabs: {key!r}")
            lines.append(f"{key}\t{value}\n")
        return offsets(self.call("produce", topic, records="".join(lines)))

    def end_offsets(self, topic: str) -> dict[int, int]:
        """Each partition of ``topic``: the offset its next record gets."""
        return offsets(self.call("offsets", topic))


def offsets(text: str) -> dict[int, int]:
    """KafkaTopics' ``PARTITION<TAB>OFFSET`` lines."""
    out = {}
    for line in text.splitlines():
        partition, offset = line.split("\t")
        out[int(partition)] = int(offset)
    return out


@contextmanager
def kafka_broker_running() -> Iterator[KafkaBroker]:
    """Format a temporary log dir, start the broker, yield it once it listens, stop it."""
    classpath = os.pathsep.join(jars("kafka-broker"))
    root = tempfile.mkdtemp(prefix="eosink-kafka-")
    try:
        port, controller_port = free_port(), free_port()
        while controller_port == port:
            controller_port = free_port()
        config = os.path.join(root, "server.properties")
        with open(config, "w") as f:
            f.write(server_properties(port, controller_port, os.path.join(root, "logs")))
        java = [jdk_tool("java"), *JVM_OPTIONS, "-cp", classpath]
        done = subprocess.run(
            [*java, "kafka.tools.StorageTool", "format", "-t", cluster_id(), "-c", config],
            capture_output=True,
            text=True,
            timeout=CALL_TIMEOUT_S,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"kafka-storage format failed:\n{done.stdout}{done.stderr}")
        output = os.path.join(root, "broker.out")
        with open(output, "wb") as out:
            broker = subprocess.Popen(
                [*java, "kafka.Kafka", config],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        watchdog = _watchdog(broker.pid, root)
        try:
            classes = _compile_client(os.path.join(root, "classes"), classpath)
            _wait_listening(broker, port, output)
            yield KafkaBroker(
                bootstrap=f"{HOST}:{port}", classpath=os.pathsep.join([classes, classpath])
            )
        finally:
            _stop(broker)
            watchdog.kill()
            watchdog.wait()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def jdk_tool(name: str) -> str:
    """``java`` or ``javac``: JAVA_HOME's if it is set (as Spark picks its Java), else PATH's."""
    home = os.environ.get("JAVA_HOME")
    found = os.path.join(home, "bin", name) if home else shutil.which(name)
    if not found or not os.access(found, os.X_OK):
        where = f"in {home}/bin (JAVA_HOME)" if home else "on PATH"
        raise RuntimeError(f"no {name} {where}: {JDK_HINT}")
    return found


def _compile_client(classes: str, classpath: str) -> str:
    """KafkaTopics.java compiled into ``classes`` (against the broker's kafka-clients)."""
    done = subprocess.run(
        [jdk_tool("javac"), "-cp", classpath, "-d", classes, str(CLIENT)],
        capture_output=True,
        text=True,
        timeout=CALL_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"javac {CLIENT} failed:\n{done.stderr[-3000:]}")
    return classes


def _wait_listening(broker: subprocess.Popen[bytes], port: int, output: str) -> None:
    """The broker opens its client listener last in its start-up: then it serves."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            socket.create_connection((HOST, port), timeout=1).close()
            return
        except OSError:
            pass
        if broker.poll() is not None or time.monotonic() > deadline:
            with open(output, errors="replace") as f:
                tail = f.read()[-3000:]
            state = "did not listen" if broker.poll() is None else f"exited {broker.returncode}"
            raise RuntimeError(f"the test Kafka broker {state} on {HOST}:{port}:\n{tail}")
        time.sleep(0.2)


def _stop(broker: subprocess.Popen[bytes], timeout_s: float = 10.0) -> None:
    """SIGTERM (a clean shutdown), SIGKILL if it takes longer than ``timeout_s``."""
    if broker.poll() is not None:
        return
    broker.send_signal(signal.SIGTERM)
    try:
        broker.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        broker.kill()
        broker.wait()


#: Kills the broker and removes its folder when the test process is gone without tearing down
#: (killed, or ended by a test runner's timeout): the broker runs in a session of its own.
_WATCHDOG = """
import os, shutil, signal, sys, time
parent, broker, root = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
while True:
    try:
        os.kill(parent, 0)
    except ProcessLookupError:
        break
    time.sleep(1)
try:
    os.kill(broker, signal.SIGKILL)
except OSError:
    pass
shutil.rmtree(root, ignore_errors=True)
"""


def _watchdog(broker_pid: int, root: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", _WATCHDOG, str(os.getpid()), str(broker_pid), root],
        start_new_session=True,
    )


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[KafkaBroker]:
    """One loopback Kafka broker for the whole test session."""
    with kafka_broker_running() as broker:
        yield broker
