"""Checking, before anything is written, that the executors can run the sinks' code.

On a cluster (and whenever ``PYSPARK_PYTHON`` is not the driver's interpreter) the executors'
Python is another environment. Without eosink or a sink's package there, the first batch fails
deep inside an unpickling traceback (``ModuleNotFoundError: No module named 'eosink'``), after
the driver already prepared the batch. So before a session's first batch the front doors run
one small probe job: every task imports eosink and each sink's module and reports what it
found. The registered sources (``eosink.sources``, e.g. ``eosink-yt-queue``) are probed too: their
readers run on the executors as well, and without the package there a stream fails at its first
batch with a bare ``ModuleNotFoundError``. A missing package, or a version other than the
driver's, fails with an error that says which package and how to get it onto the executors. The
probe runs once per Spark application and set of sinks and sources.

The probe function is pickled **by value** (it is built from source in a namespace of its own),
so it runs on executors that lack eosink.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
from collections.abc import Iterable, Mapping
from importlib.metadata import EntryPoint, PackageNotFoundError, version
from typing import Any

import attrs

from eosink.errors import ConfigurationError

#: Set to "0" to skip the check (e.g. a cluster where a probe job is not allowed).
SKIP_ENV = "EOSINK_CHECK_EXECUTORS"

_PROBE_SOURCE = """
def probe(batches, modules=MODULES):
    import importlib, json, os, sys
    import pyarrow as pa
    found = {}
    for module, dist in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            found[module] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        try:
            from importlib.metadata import version
            found[module] = {"version": version(dist) if dist else None}
        except Exception:
            found[module] = {"version": None}
    report = json.dumps({"python": sys.executable, "host": os.uname().nodename, "found": found})
    for _ in batches:
        pass
    yield pa.record_batch([pa.array([report])], names=["report"])
"""


class ExecutorEnvironmentError(ConfigurationError):
    """The executors' Python lacks a package the sinks need (or has another version of it)."""


@attrs.frozen
class Requirement:
    """A module the executors must import, and the distribution that provides it."""

    module: str
    dist: str | None
    for_what: str

    def driver_version(self) -> str | None:
        try:
            return version(self.dist) if self.dist else None
        except PackageNotFoundError:
            return None


def requirements(
    sinks: Iterable[Any], sources: Mapping[str, EntryPoint] | None = None
) -> list[Requirement]:
    """eosink itself, the module of each sink (its class's module, with its dependencies) and
    the module of each source (its entry point's module)."""
    from eosink.registry import KNOWN_SOURCES, installed_sinks

    entry_points = installed_sinks()
    found = [Requirement("eosink.spark.datasource", "eosink", "eosink")]
    for sink in sinks:
        name = getattr(sink, "name", str(sink))
        cls = sink if isinstance(sink, type) else type(sink)
        ep = entry_points.get(name)
        if ep is None or ep.value.split(":")[0] != cls.__module__:
            continue  # not an installed sink (e.g. a class of the job itself): nothing to name
        dist = getattr(getattr(ep, "dist", None), "name", None)
        found.append(Requirement(cls.__module__, dist, f"sink {name!r}"))
    for name, ep in sorted((sources or {}).items()):
        dist = getattr(getattr(ep, "dist", None), "name", None) or KNOWN_SOURCES.get(name)
        found.append(Requirement(ep.value.split(":")[0], dist, f"source {name!r}"))
    return found


def _probe_function(modules: list[tuple[str, str | None]]) -> Any:
    namespace: dict[str, Any] = {"__name__": "eosink_executor_probe", "MODULES": modules}
    exec(compile(_PROBE_SOURCE, "<eosink executor probe>", "exec"), namespace)  # noqa: S102
    return namespace["probe"]


def _fixes(packages: list[str]) -> str:
    pip = " ".join(packages)
    return (
        "Fix one of: (1) install them into the executors' Python on every node "
        f"(`pip install {pip}`); (2) point the executors at a Python that has them: "
        "`PYSPARK_PYTHON` (or `spark.pyspark.python`), e.g. the driver's own venv when it exists "
        "on every node; (3) ship an environment with the job: a packed venv "
        "(`venv-pack -o env.tar.gz`, then `--conf spark.archives=env.tar.gz#env` and "
        "`PYSPARK_PYTHON=./env/bin/python`) or a pex built by `./pants package` "
        "(`--conf spark.files=app.pex`, `PYSPARK_PYTHON=./app.pex`). "
        "See 'Shipping eosink to a cluster' in eosink's README."
    )


def _missing_from_error(text: str) -> str | None:
    match = re.search(r"No module named '([^']+)'", text)
    return match.group(1) if match else None


def _run_probe(spark: Any, reqs: list[Requirement], parallelism: int) -> list[dict[str, Any]]:
    probe = _probe_function([(r.module, r.dist) for r in reqs])
    df = spark.range(0, parallelism, 1, parallelism)
    rows = df.mapInArrow(probe, "report string").collect()
    return [json.loads(row.report) for row in rows]


def _parallelism(spark: Any) -> int:
    try:
        return max(2, int(spark.sparkContext.defaultParallelism))
    except Exception:  # noqa: BLE001 - Spark Connect: no SparkContext
        return 2


def check_reports(reports: list[dict[str, Any]], reqs: list[Requirement]) -> None:
    """Raise :class:`ExecutorEnvironmentError` for what the probe found missing or different."""
    missing: dict[str, tuple[Requirement, str]] = {}
    differing: dict[str, tuple[Requirement, str | None, str | None]] = {}
    pythons = sorted({r["python"] for r in reports})
    for report in reports:
        for req in reqs:
            seen = report["found"].get(req.module, {})
            if "error" in seen:
                missing.setdefault(req.module, (req, seen["error"]))
                continue
            ours, theirs = req.driver_version(), seen.get("version")
            if ours and theirs and ours != theirs:
                differing.setdefault(req.module, (req, ours, theirs))
    where = f"the executors' Python ({', '.join(pythons)}; the driver runs {sys.executable})"
    if missing:
        packages = sorted({_package(req, error) for req, error in missing.values()})
        details = "; ".join(f"{req.for_what}: {error}" for req, error in missing.values())
        raise ExecutorEnvironmentError(
            f"{where} lacks {', '.join(packages)}, needed on every executor; nothing was "
            f"written ({details}). {_fixes(packages)}"
        )
    if differing:
        details = "; ".join(
            f"{req.dist} {theirs} on the executors, {ours} on the driver"
            for req, ours, theirs in differing.values()
        )
        packages = sorted(f"{req.dist}=={ours}" for req, ours, _ in differing.values())
        raise ExecutorEnvironmentError(
            f"{where} has other versions of the sinks' packages than the driver ({details}); "
            f"nothing was written. Use the same versions on both sides. {_fixes(packages)}"
        )


def _package(req: Requirement, error: str) -> str:
    """The distribution to install for a failed import (a dependency of the sink, maybe)."""
    module = _missing_from_error(error)
    if module is None or module.split(".")[0] == req.module.split(".")[0]:
        return req.dist or req.module.split(".")[0]
    if module.split(".")[0] == "eosink":
        return "eosink"
    return module.split(".")[0]


_checked: set[tuple[str, tuple[str, ...]]] = set()
_lock = threading.Lock()


def _application(spark: Any) -> str:
    try:
        return str(spark.sparkContext.applicationId)
    except Exception:  # noqa: BLE001 - Spark Connect: one check per session
        return f"connect:{getattr(spark, 'session_id', id(spark))}"


def check_executors(
    spark: Any, sinks: Iterable[Any], sources: Mapping[str, EntryPoint] | None = None
) -> None:
    """Fail before anything is written (or read) if the executors cannot run ``sinks`` and
    ``sources`` (entry points by name); once per app."""
    if os.environ.get(SKIP_ENV, "1") == "0":
        return
    reqs = requirements(sinks, sources)
    key = (_application(spark), tuple(sorted(r.module for r in reqs)))
    with _lock:
        if key in _checked:
            return
    try:
        reports = _run_probe(spark, reqs, _parallelism(spark))
    except Exception as exc:  # noqa: BLE001 - the probe itself could not run on the executors
        module = _missing_from_error(str(exc))
        if module is None:
            raise
        package = "eosink" if module.split(".")[0] == "eosink" else module.split(".")[0]
        raise ExecutorEnvironmentError(
            f"the executors' Python cannot import {module!r} (package {package}), which eosink "
            f"needs on every executor; nothing was written. {_fixes([package])}"
        ) from None
    check_reports(reports, reqs)
    with _lock:
        _checked.add(key)
