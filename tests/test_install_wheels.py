"""What a user gets from ``pip install``: every wheel's requirements, and a clean install.

The wheels are the ones ``./pants package`` builds (tests/BUILD hands every distribution to
these tests). A requirement is inferred by Pants from whatever a library's files import, the
test kit (``eosink.testing``) included, so a test tool imported by the kit silently became a
runtime requirement of eosink once (``moto[server]``: 70-odd packages no job needs). Each
wheel's runtime ``Requires-Dist`` is therefore held against an allow-list here, and a clean
venv with ``eosink`` + ``eosink-files`` from the wheels, third-party packages from the package
index at the project's pins, must hold no test tool and still run a batch into a folder.

Slow (pip resolves and installs ~40 packages): its own pytest process, tag ``install``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

#: Every distribution of the repo and the runtime requirements its wheel may declare (names,
#: without extras). A new requirement is a decision: add it here with the reason in review.
ALLOWED: dict[str, set[str]] = {
    "eosink": {"attrs", "fsspec", "numpy", "pandas", "pluggy", "pyarrow", "pyspark", "structlog"},
    "eosink-files": {"attrs", "eosink", "fsspec", "pyarrow", "pyspark", "structlog"},
    "eosink-delta": {
        *("attrs", "deltalake", "eosink", "obstore", "pyarrow", "pyspark", "structlog"),
    },
    "eosink-yt-common": {
        *("attrs", "eosink", "pyarrow", "structlog", "ytsaurus-client", "ytsaurus-yson"),
    },
    "eosink-yt-dynamic": {
        *("attrs", "eosink", "eosink-yt-common", "numpy", "pyarrow", "pyspark", "structlog"),
        *("ytsaurus-client", "ytsaurus-yson"),
    },
    "eosink-yt-static": {
        *("attrs", "eosink", "eosink-yt-common", "pyarrow", "structlog"),
        *("ytsaurus-client", "ytsaurus-yson"),
    },
    "eosink-yt-queue": {
        *("attrs", "eosink", "eosink-yt-common", "pyarrow", "pyspark", "structlog"),
        *("ytsaurus-client", "ytsaurus-yson"),
    },
    "eosink-yt-emulator": {"ytsaurus-client", "ytsaurus-yson"},
    "eosink-iceberg": {"attrs", "eosink", "pyarrow", "pyiceberg"},
    # numpy: the binary COPY encoder works on the Arrow buffers as numpy arrays
    "eosink-postgres": {"attrs", "eosink", "numpy", "psycopg", "pyarrow"},
    "eosink-sqlite": {"attrs", "eosink", "pyarrow"},
}

#: Test tools (and what they bring): never a runtime requirement, never in a user's clean venv.
TEST_TOOLS = {"pytest", "hypothesis", "moto", "boto3", "botocore", "flask", "werkzeug"}

#: The core's "testing" extra: what the kit (eosink.testing) needs beyond the library.
TESTING_EXTRA = {"pytest", "hypothesis", "moto", "boto3"}


def canonicalize_name(name: str) -> str:
    """A distribution name as the package index compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _repo_root() -> Path:
    here = Path(__file__).resolve()
    for folder in here.parents:
        if (folder / "3rdparty" / "python" / "constraints.txt").exists():
            return folder
    raise AssertionError(f"no 3rdparty/python/constraints.txt above {here}")


def built_wheels() -> dict[str, Path]:
    """The wheels ./pants package built, by canonical distribution name."""
    root = Path.cwd()
    found: dict[str, Path] = {}
    for folder in (root, root / "dist"):
        for wheel in folder.glob("*.whl") if folder.is_dir() else ():
            found[canonicalize_name(wheel.name.split("-")[0])] = wheel
    if not found:
        raise AssertionError(
            f"no wheels in {root} or {root / 'dist'}: run with ./pants test (tests/BUILD builds "
            "them as runtime package dependencies) or after ./pants package"
        )
    return found


def metadata(wheel: Path) -> list[str]:
    """The wheel's ``Requires-Dist`` lines."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        message = Parser().parsestr(archive.read(name).decode())
    return list(message.get_all("Requires-Dist") or ())


def split_requirements(lines: list[str]) -> tuple[set[str], dict[str, set[str]]]:
    """Runtime requirement names, and the names each extra adds (PEP 508 lines)."""
    runtime: set[str] = set()
    extras: dict[str, set[str]] = {}
    for line in lines:
        spec, _, marker = line.partition(";")
        found = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", spec)
        assert found, f"not a requirement: {line!r}"
        name = canonicalize_name(found.group(1))
        extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", marker)
        if extra:
            extras.setdefault(canonicalize_name(extra.group(1)), set()).add(name)
        else:
            runtime.add(name)
    return runtime, extras


def test_every_distribution_is_built_and_checked():
    assert set(built_wheels()) == set(ALLOWED), (
        "a distribution without an allow-list entry (add it to ALLOWED) or one that was not "
        "built (tests/BUILD: install_packages)"
    )


@pytest.mark.parametrize("dist", sorted(ALLOWED))
def test_wheel_requires_only_what_its_code_needs(dist):
    runtime, _ = split_requirements(metadata(built_wheels()[dist]))
    assert not runtime & TEST_TOOLS, f"{dist} requires test tools: {sorted(runtime & TEST_TOOLS)}"
    extra = sorted(runtime - ALLOWED[dist])
    assert runtime <= ALLOWED[dist], f"{dist} requires more than its allow-list: {extra}"


def test_the_kit_tools_come_with_the_testing_extra():
    _, extras = split_requirements(metadata(built_wheels()["eosink"]))
    assert extras.get("testing") == TESTING_EXTRA


def _clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without what makes the project's sources importable."""
    hidden = ("PYTHONPATH", "PEX_EXTRA_SYS_PATH", "__PEX_EXTRA_SYS_PATH__", "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items() if k not in hidden and not k.startswith("PEX_")}
    return {**env, **extra}


#: A batch into a local folder through the core's local runner, a replay of it (skipped), then
#: the folder read back; runs in the clean venv.
BATCH_SCRIPT = textwrap.dedent(
    """
    import sys
    import pyarrow as pa
    import pyarrow.dataset as ds
    import eosink
    from eosink.plugin import BatchContext
    from eosink.testing import run_batch
    from eosink.testing import LocalRunner

    out = sys.argv[1]
    sink = eosink.sink("files", path=out)
    parts = [[pa.record_batch({"id": pa.array([p * 10 + i for i in range(5)], pa.int64())})]
             for p in range(2)]
    ctx = BatchContext("files", "clean-install", 0, query_id="q")
    first = run_batch(sink, ctx, parts[0][0].schema, LocalRunner(parts))
    again = run_batch(sink, ctx, parts[0][0].schema, LocalRunner(parts))
    ids = sorted(ds.dataset(out, format="parquet").to_table().column("id").to_pylist())
    print("result:", first.status, first.rows, again.status, ids)
    """
)


def test_a_clean_venv_with_eosink_and_a_sink_holds_no_test_tool_and_runs_a_batch(tmp_path):
    wheels = built_wheels()
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=_clean_env())
    python = str(venv / "bin" / "python")
    constraints = _repo_root() / "3rdparty" / "python" / "constraints.txt"
    install = subprocess.run(
        [python, "-m", "pip", "install", "-q", "-c", str(constraints)]
        + [str(wheels["eosink"]), str(wheels["eosink-files"])],
        capture_output=True,
        text=True,
        env=_clean_env(),
    )
    assert install.returncode == 0, install.stderr[-4000:]
    listed = subprocess.run(
        [python, "-m", "pip", "list", "--format=freeze"],
        capture_output=True,
        text=True,
        check=True,
        env=_clean_env(),
    ).stdout.split()
    installed = {canonicalize_name(line.split("==")[0]) for line in listed}
    print(f"clean venv: {len(installed)} packages: {sorted(installed)}")
    assert not installed & TEST_TOOLS, sorted(installed & TEST_TOOLS)
    assert {"eosink", "eosink-files", "pyspark"} <= installed

    out = tmp_path / "out"
    ran = subprocess.run(
        [python, "-c", BATCH_SCRIPT, str(out)],
        capture_output=True,
        text=True,
        env=_clean_env(),
        cwd=tmp_path,
    )
    assert ran.returncode == 0, ran.stderr[-4000:]
    ids = sorted(p * 10 + i for p in range(2) for i in range(5))
    # eosink's events never share the job's stdout
    assert ran.stdout.splitlines() == [f"result: committed 10 skipped {ids}"], ran.stderr
