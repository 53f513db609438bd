"""A class-data-sharing archive of Spark's classes, made once per machine, so that the test
kit's local Spark JVMs map Spark's classes instead of loading and verifying them one by one.

A local Spark JVM loads some 16,000 classes from Spark's jars before its first micro-batch ends;
on a 2-core machine that is most of the CPU a short streaming query costs, and the tests start
such JVMs by the dozen (every killed and restarted query is two of them). With the archive
mapped, a short streaming query took ~35% less CPU (measured: the same job, 55-92 CPU-seconds
without, 42-65 with). Nothing else changes: the archive holds the classes of the same jars, and
the JVM checks it against them (jar names, sizes and times) and ignores it if they differ.

Opt-in: ``EOSINK_SPARK_CLASS_ARCHIVES`` names a folder (pants.toml points it at the checkout's
``.jvm/class-archives``). Without it, :func:`java_options` returns nothing. With it, the first
process that asks for an archive not made yet makes it (``python -m
eosink.testing.spark_class_archive ARCHIVE``: a short Spark job whose JVM writes the classes it
loaded when it exits), holding a lock; processes asking meanwhile go on without one. The file
is written under a temporary name and renamed when its JVM has exited cleanly: a truncated
archive crashes the JVM that maps it, so a partial one must never be found under the name.
The reference engines' processes (:mod:`eosink.testing.reference_spark`, Sparks of other
versions) write theirs in their first run instead (:func:`made_by_this_run`).

The archive is keyed by the Spark version, its jars' install and the JVM's build: an archive
of other jars or another JVM would be ignored by the JVM anyway, silently (``-Xlog:cds*=off``:
the JVM's warnings would otherwise go to the job's stdout).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from eosink.logs import get_logger

ENV = "EOSINK_SPARK_CLASS_ARCHIVES"
QUIET = "-Xlog:cds*=off"

log = get_logger(__name__)


def java_options() -> str:
    """The JVM options that map this Spark's archive (made first if need be), or ``""``."""
    archive = local_archive()
    if archive is None:
        return ""
    if not archive.exists():
        make_once(archive)
    return mapping(archive)


def mapping(archive: Path) -> str:
    """The JVM options that map ``archive``, or ``""`` while it does not exist."""
    return f"-XX:SharedArchiveFile={archive} {QUIET}" if archive.exists() else ""


def local_archive() -> Path | None:
    """The archive for this process's pyspark, or ``None`` (no folder set, no JVM found)."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    # A JVM takes a jar of another path for the archived one only if it is the same file: Pex's
    # environments hard-link one install of pyspark's jars, so its Spark core keys them.
    return archive_path(pyspark.__version__, min(jars.glob("spark-core_*.jar"), default=jars))


def archive_path(version: str, install: Path) -> Path | None:
    """``<folder>/spark-<version>-<key>.jsa`` for Spark ``version`` installed with the file
    ``install`` (its inode is in the key, with the JVM's build), or ``None``."""
    folder = os.environ.get(ENV)
    java = java_binary()
    if not folder or java is None:
        return None
    libjvm = java.resolve().parent.parent / "lib" / "server" / "libjvm.so"
    jvm, installed = (libjvm if libjvm.exists() else java.resolve()).stat(), install.stat()
    key = ":".join(
        str(n) for n in (libjvm, jvm.st_size, jvm.st_mtime_ns, installed.st_dev, installed.st_ino)
    )
    return Path(folder) / f"spark-{version}-{hashlib.sha256(key.encode()).hexdigest()[:12]}.jsa"


@contextlib.contextmanager
def made_by_this_run(archive: Path | None) -> Iterator[tuple[str, str | None]]:
    """For a Spark JVM that runs to a clean exit anyway (a reference engine's process): the
    options that map ``archive`` and ``None`` if it exists; else, if no other process is making
    it, no options and the archive's path, which that JVM writes at its exit (under a temporary
    name, renamed by its process once the JVM has exited cleanly); else nothing."""
    if archive is None or archive.exists():
        yield (mapping(archive) if archive else ""), None
        return
    with locked(archive) as mine:
        yield "", (str(archive) if mine and not archive.exists() else None)


@contextlib.contextmanager
def locked(archive: Path, *, wait: bool = False) -> Iterator[bool]:
    """The lock of the archives' folder: whether this process holds it (``wait``: until it
    does), so that one process at a time makes an archive."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    with open(archive.parent / ".lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True


def java_binary() -> Path | None:
    """The ``java`` Spark's launcher runs: ``$JAVA_HOME/bin/java``, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return Path(home) / "bin" / "java"
    found = shutil.which("java")
    return Path(found) if found else None


def make_once(archive: Path, *, wait: bool = False, timeout_s: float = 300) -> None:
    """Make ``archive`` unless another process is making it: then go on without it, or
    ``wait`` until that process is done. A failed making is not tried again (``<archive>.failed``
    says why; delete it to retry): every Spark of the tests would pay for it."""
    failed = archive.with_name(f"{archive.name}.failed")  # tried once: not again per process
    with locked(archive, wait=wait) as mine:
        if not mine or archive.exists() or failed.exists():
            return
        log.info("spark_class_archive.making", archive=str(archive))
        try:
            subprocess.run(
                [sys.executable, "-m", __name__, str(archive)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=timeout_s,
                check=True,
            )
        except (subprocess.SubprocessError, OSError) as error:
            log.warning("spark_class_archive.failed", archive=str(archive), error=str(error))
            failed.write_text(f"{error}\n")


def train(spark: Any, work: str) -> None:
    """What a sink's Spark test does, in small: a JSON file stream through ``mapInArrow`` into
    ``foreachBatch`` (Arrow and Parquet out), an update-mode aggregation, Parquet read back."""
    source = os.path.join(work, "in")
    os.makedirs(source)
    for n in range(3):
        with open(os.path.join(source, f"{n}.json"), "w") as f:
            f.writelines(
                json.dumps({"id": n * 100 + i, "name": f"n{i % 7}"}) + "\n" for i in range(50)
            )
    schema = "id long, name string"
    stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(source)
    stream = stream.mapInArrow(lambda batches: batches, stream.schema)

    def each(batch: Any, batch_id: int) -> None:
        batch.toArrow()
        batch.groupBy("name").count().collect()
        batch.write.mode("append").parquet(os.path.join(work, "out"))

    checkpoint = os.path.join(work, "ckpt")
    query = stream.writeStream.foreachBatch(each).option("checkpointLocation", checkpoint)
    query.trigger(availableNow=True).start().awaitTermination()
    totals = spark.readStream.schema(schema).json(source).groupBy("name").count()
    query = totals.writeStream.outputMode("update").foreachBatch(lambda b, i: b.collect())
    query = query.option("checkpointLocation", checkpoint + "-totals")
    query.trigger(availableNow=True).start().awaitTermination()
    spark.read.parquet(os.path.join(work, "out")).where("id > 3").collect()


def main(archive: str) -> None:
    """Run :func:`train` in a JVM that writes its classes when it exits; publish them as
    ``archive`` once it has exited cleanly."""
    from eosink.testing.reference_spark_main import write_archive
    from eosink.testing.spark import local_spark

    work = tempfile.mkdtemp(prefix="eosink-class-archive-")
    partial = f"{archive}.{os.getpid()}.partial"
    spark = local_spark(
        java_options=f"-XX:ArchiveClassesAtExit={partial} {QUIET}", class_archive=False
    )
    try:
        train(spark, work)
    finally:
        spark.stop()
        write_archive(partial, archive)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1])
