"""JVM artifacts for tests: the jars of one set of the repo's ``3rdparty/jvm/artifacts.txt``
(Delta's and Iceberg's Spark connectors, S3A, Spark's Kafka connector, a Kafka broker, the
PostgreSQL JDBC driver), fetched by ``build-support/jvm-jars`` with the machine's ``mvn``.

The script fetches a set once into the checkout's ``.jvm/`` and lists its jars; later calls
only read that list. A test that needs a set calls :func:`jars` (or :func:`spark_jars`) in a
session fixture, so a fresh clone's ``./pants test`` fetches what it needs by itself. Under
Pants the tests run in a sandbox: the script and the pins reach it as dependencies of the test
target, and ``EOSINK_JVM_DIR`` (pants.toml) points the script at the checkout's ``.jvm/``, so
the jars are fetched once for every sandbox.

Hand Spark only these jars (``spark.jars``), never ``spark.jars.packages``: that resolves the
connectors' transitive Jackson/Parquet jars too, which clash with Spark's own.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

#: The repo's scripts (the jars' fetch, the other Sparks' environments) are here, relative to
#: the repo root (or a Pants sandbox's root).
SCRIPTS = Path("build-support")
#: A cold fetch of every set takes minutes on a slow link; a warm one well under a second.
FETCH_TIMEOUT_S = 1800


class JvmJarsError(RuntimeError):
    """The jars of a set (or another Spark's environment) could not be had (no ``mvn``, no
    network, an unknown set)."""


def script(name: str = "jvm-jars") -> Path:
    """``build-support/<name>`` of the working directory's repo (or sandbox), or of the repo
    this module lives in."""
    starts = [Path.cwd(), Path(__file__).resolve().parent]
    for start in starts:
        for folder in (start, *start.parents):
            candidate = folder / SCRIPTS / name
            if candidate.is_file():
                return candidate
    raise JvmJarsError(
        f"no {SCRIPTS / name} above {' or '.join(str(s) for s in starts)}: the JVM tests run "
        "from the eosink repository (under Pants, the test target needs the script and its "
        "pins in 3rdparty/jvm/ as dependencies)"
    )


def jars(name: str) -> list[str]:
    """The absolute paths of the jars of set ``name``, fetched first if they are not yet."""
    script_path = script()
    try:
        done = subprocess.run(
            [str(script_path), "--print", name],
            capture_output=True,
            text=True,
            timeout=FETCH_TIMEOUT_S,
            env=os.environ.copy(),
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise JvmJarsError(f"{script_path} {name}: {exc}") from exc
    if done.returncode != 0:
        raise JvmJarsError(
            f"{script_path} {name} failed (exit {done.returncode}):\n{done.stderr.strip()}"
        )
    paths = [line for line in done.stdout.splitlines() if line.strip()]
    if not paths:
        raise JvmJarsError(f"{script_path} {name} listed no jars")
    missing = [p for p in paths if not os.path.isfile(p)]
    if missing:
        raise JvmJarsError(f"{script_path} {name} listed jars that are not there: {missing[:3]}")
    return paths


def spark_jars(*names: str) -> dict[str, str]:
    """Spark settings that put the jars of the sets ``names`` on the session's classpath, for
    :func:`eosink.testing.spark.local_spark` (``local_spark(**spark_jars("delta"))``)."""
    paths = [path for name in names for path in jars(name)]
    return {"spark.jars": ",".join(paths)}
