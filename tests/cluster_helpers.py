"""What the cluster tests share: Python environments for executors and the CLI, drivers, stalls.

Two virtual environments are built once per test process, both seeing the test's third-party
packages (pyspark, pyarrow, deltalake, the YT client...) through a ``.pth`` line, neither
seeing the project's sources:

* ``bare_python``: nothing of eosink, as an executor node where nobody installed it;
* ``wheel_env``: the project's wheels (built by ``./pants package``, handed to the tests as
  runtime package dependencies) installed by pip, so ``<venv>/bin/eosink`` is the console
  script a user gets from ``pip install eosink``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest

import cluster_job

FILES, ROWS_PER_FILE = 3, 200


def _deps_dir() -> str:
    """The site-packages folder holding the test's third-party packages (not eosink's code)."""
    import pyarrow

    return str(Path(pyarrow.__file__).resolve().parents[1])


def _clean_env() -> dict[str, str]:
    """The test's environment without what makes the project's sources importable."""
    hidden = ("PYTHONPATH", "PEX_EXTRA_SYS_PATH", "__PEX_EXTRA_SYS_PATH__")
    return {k: v for k, v in os.environ.items() if k not in hidden and not k.startswith("PEX_")}


def make_venv(root: Path, *, pip: bool) -> Path:
    """A venv at ``root`` that sees the third-party packages; returns its python."""
    args = [sys.executable, "-m", "venv", str(root)] + ([] if pip else ["--without-pip"])
    subprocess.run(args, check=True, env=_clean_env())
    python = root / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
        env=_clean_env(),
    ).stdout.strip()
    Path(site, "third_party.pth").write_text(_deps_dir() + "\n")
    return python


def imports(python: Path, module: str) -> bool:
    done = subprocess.run([str(python), "-c", f"import {module}"], env=_clean_env())
    return done.returncode == 0


def wheels() -> list[Path]:
    """The project's wheels in the test's sandbox (runtime package dependencies)."""
    found = sorted(p for p in Path.cwd().rglob("eosink*.whl") if ".venv" not in p.parts)
    if not found:
        raise AssertionError(
            f"no eosink wheels under {Path.cwd()}: run these tests with ./pants test, whose "
            "tests/BUILD builds them (runtime_package_dependencies)"
        )
    return found


@pytest.fixture(scope="session")
def bare_python(tmp_path_factory) -> Path:
    python = make_venv(tmp_path_factory.mktemp("bare") / "venv", pip=False)
    assert imports(python, "pyspark") and not imports(python, "eosink")
    return python


@pytest.fixture(scope="session")
def wheel_env(tmp_path_factory) -> Path:
    """A venv with the project's wheels installed by pip; returns its ``bin`` folder."""
    root = tmp_path_factory.mktemp("wheels") / "venv"
    python = make_venv(root, pip=True)
    assert not imports(python, "eosink")
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-index", "--no-deps"]
        + [str(w) for w in wheels()],
        check=True,
        env={**_clean_env(), "PIP_CONFIG_FILE": os.devnull},
    )
    return root / "bin"


def run_cli(bin_dir: Path, *args: str, check_exit: int | None = 0) -> subprocess.CompletedProcess:
    """Run the installed ``eosink`` console script."""
    done = subprocess.run(
        [str(bin_dir / "eosink"), *args], capture_output=True, text=True, env=_clean_env()
    )
    if check_exit is not None:
        assert done.returncode == check_exit, (args, done.returncode, done.stdout, done.stderr)
    return done


# -- sources, drivers, stalls --------------------------------------------------------------
def write_source(work: Path, files: int = FILES) -> list[int]:
    """``files`` JSON files of ROWS_PER_FILE rows (one per micro-batch); returns every id."""
    (work / "in").mkdir(parents=True)
    expected = []
    for n in range(files):
        path = work / "in" / f"part-{n}.json"
        with open(path, "w") as f:
            for i in range(ROWS_PER_FILE):
                row_id = n * 1000 + i
                f.write(
                    json.dumps(
                        {"id": row_id, "name": f"r{row_id}", "tablet_index": 0, "row_index": row_id}
                    )
                    + "\n"
                )
                expected.append(row_id)
        stamp = time.time() - 100 + n  # the file source takes files in modification-time order
        os.utime(path, (stamp, stamp))
    return expected


def start_driver(work: Path, job: dict[str, Any], env: dict[str, str] | None = None):
    config = work / f"job-{time.monotonic_ns()}.json"
    config.write_text(json.dumps({**job, "work": str(work)}))
    base = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.Popen(
        [sys.executable, "-m", cluster_job.__name__, str(config)],
        env={**base, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=open(work / f"{config.stem}.log", "w"),
        start_new_session=True,
    )


def arm(work: Path, row_id: int | None) -> None:
    armed = work / "armed"
    if row_id is None:
        armed.unlink(missing_ok=True)
    else:
        tmp = work / "armed.tmp"
        tmp.write_text(str(row_id))
        tmp.replace(armed)


def wait_reached(work: Path, name: str, row_id: int, driver, timeout_s: float = 300) -> int:
    """Wait until query ``name``'s task holding ``row_id`` stalls; returns its Python worker's
    pid."""
    marker = work / f"reached-{name}-{row_id}"
    deadline = time.monotonic() + timeout_s
    while not marker.exists() or not marker.read_text():
        assert driver.poll() is None, f"the driver ended before row {row_id}: {last_log(work)}"
        assert (
            time.monotonic() < deadline
        ), f"{name}: no task reached row {row_id}: {last_log(work)}"
        time.sleep(0.2)
    return int(marker.read_text().split("=")[1])


def kill_driver(driver) -> None:
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait()


def last_log(work: Path) -> str:
    logs = sorted(work.glob("job-*.log"))
    return logs[-1].read_text()[-4000:] if logs else "(no driver log)"


# -- the kill scenario of test_cluster_e2e.py -------------------------------------------------
@attrs.frozen
class Target:
    """A sink's fresh target: its options, the CLI's arguments for it, a reader, a damage."""

    sink: str
    door: str  # "foreach_batch" or "data_source"
    options: dict[str, str]
    cli: list[str]  # TARGET and connection options of the eosink command
    read_ids: Callable[[], list[int]]  # an independent reader
    damage: Callable[[], None]  # breaks what a proof references (verify must then exit 1)
    read_back: str | None = None  # files: where the driver writes what Spark's reader read

    def job(self) -> dict[str, Any]:
        query = {"name": self.sink, "sink": self.sink, "door": self.door, "options": self.options}
        return query | ({"read_back": self.read_back} if self.read_back else {})


def single_job(cluster, sink: str, options: dict[str, str], door: str, **conf: Any) -> dict:
    """A driver's job of one query (``name`` q) into ``sink``."""
    target = {"name": "q", "sink": sink, "door": door, "options": options}
    return {"master": cluster.master_url, "conf": conf, "targets": [target]}


def workers_then_driver_killed(cluster, wheel_env: Path, work: Path, targets: list[Target]) -> None:
    """One query per target, through the target's front door, in one driver. Batch 1: the
    worker of each query's stalled task killed (one worker, then the other if a query's task
    ran there); batch 2: the driver killed; restart.

    Then each target's reader counts exactly the source rows, and the installed eosink command
    finds the last batch's proof, verifies the target, lists leftovers, and sees the damage.
    """
    expected = write_source(work)
    job = {"master": cluster.master_url, "conf": cluster.spark_conf()}
    job["targets"] = [t.job() for t in targets]

    arm(work, 1050)
    driver = start_driver(work, job)
    pids = [wait_reached(work, t.sink, 1050, driver) for t in targets]
    victims = {w.index: w for w in (cluster.worker_of(pid) for pid in pids)}
    for index in sorted(victims):  # every query loses a task mid-batch
        cluster.kill_worker(victims[index])
        cluster.ensure_workers()
    arm(work, 2050)  # releases batch 1's retried tasks, stalls batch 2
    for t in targets:
        wait_reached(work, t.sink, 2050, driver)
    kill_driver(driver)

    arm(work, None)
    restarted = start_driver(work, job)
    assert restarted.wait(timeout=600) == 0, last_log(work)

    for t in targets:
        held = Counter(t.read_ids())
        assert held == Counter(expected), (
            f"{t.sink}: duplicates: {sum(held[i] - 1 for i in held if held[i] > 1)}, "
            f"lost: {len(set(expected) - set(held))}"
        )
        status = json.loads(run_cli(wheel_env, "status", t.sink, *t.cli, "--json").stdout)
        assert [(w["writer_id"], w["batch_id"]) for w in status["writers"]] == [
            ("orders", FILES - 1)
        ], (t.sink, status)
        run_cli(wheel_env, "verify", t.sink, *t.cli)
        run_cli(wheel_env, "cleanup", t.sink, *t.cli, "--older-than", "0s")
        t.damage()
        verify = run_cli(wheel_env, "verify", t.sink, *t.cli, "--json", check_exit=1)
        assert json.loads(verify.stdout)["problems"], t.sink
