"""End to end on a standalone cluster: workers, then the driver, killed (SIGKILL) in the middle
of a batch, for files, delta, yt-dynamic, yt-static and postgres at once
(``workers_then_driver_killed``).

One driver process runs five streaming queries (one per sink, one source file per micro-batch)
on the cluster, each sink through one front door (:data:`DOORS`: both doors among them; every
sink meets both doors killed and restarted in its own package's end-to-end tests). Batch 1
stalls in one task of every query; the workers running those tasks are killed with their
executors and Python workers, one after the other (Spark runs the tasks again elsewhere; a
replacement worker joins after each kill); batch 2 stalls and the driver's process group is
killed; the queries restart from their checkpoints.
Independent readers then count exactly the source rows: Spark's own reader on the cluster
(files), delta-rs (delta), the test's own YT client against the emulator on loopback (the YT
sinks), plain SQL (postgres: a loopback server the executors connect to). The installed
``eosink`` command (from the wheels) finds the last batch's proof, verifies the target, lists
what the killed attempts left, and notices damage done afterwards (a committed file removed;
the dynamic table unmounted; the static table's rows gone while its proofs stay; a committed
row deleted).
"""

from __future__ import annotations

import json
import os
from collections import Counter

from cluster_helpers import (
    Target,
    arm,
    kill_driver,
    last_log,
    start_driver,
    wait_reached,
    workers_then_driver_killed,
    write_source,
)
from eosink_yt_emulator.pytest_plugin import yt_emulator  # noqa: F401 - the YT sinks' proxy

from eosink.testing.postgres import postgres_server  # noqa: F401 - the postgres sink's server
from eosink.testing.s3 import s3_server


#: The front door of each sink's query.
DOORS = {
    "files": "foreach_batch",
    "delta": "data_source",
    "yt-dynamic": "foreach_batch",
    "yt-static": "data_source",
    "postgres": "foreach_batch",
}


def read_delta(path):
    from deltalake import DeltaTable

    return DeltaTable(path).to_pyarrow_table().column("id").to_pylist()


def remove_a_committed_file(sink, path):
    if sink == "delta":
        from deltalake import DeltaTable

        uri = DeltaTable(path).file_uris()[0]
    else:
        from eosink_files import committed_files

        uri = committed_files(path)[0].uri
    os.remove(uri.removeprefix("file://"))


def file_targets(tmp_path):
    files, delta = str(tmp_path / "files"), str(tmp_path / "delta")
    read_back = tmp_path / "read_back.json"
    return [
        Target(
            sink="files",
            door=DOORS["files"],
            options={"path": files},
            cli=[files],
            read_ids=lambda: json.loads(read_back.read_text()),  # Spark's reader, on the cluster
            damage=lambda: remove_a_committed_file("files", files),
            read_back=str(read_back),
        ),
        Target(
            sink="delta",
            door=DOORS["delta"],
            options={"path": delta},
            cli=[delta],
            read_ids=lambda: read_delta(delta),
            damage=lambda: remove_a_committed_file("delta", delta),
        ),
    ]


def yt_targets(emulator):
    yt = emulator.client()
    config = json.dumps(emulator.client_config())
    options = {"proxy": emulator.url, "proxy_discovery": "false", "client_config": config}
    cli = ["--proxy", emulator.url, "--proxy-discovery", "false", "--client-config", config]
    dynamic, static = "//home/eosink/dynamic", "//home/eosink/static"
    return [
        Target(
            sink="yt-dynamic",
            door=DOORS["yt-dynamic"],
            options={**options, "path": dynamic, "create_table": "true"},
            cli=[dynamic, *cli],
            read_ids=lambda: [r["id"] for r in yt.select_rows(f"id from [{dynamic}]")],
            damage=lambda: yt.unmount_table(dynamic, sync=True),
        ),
        Target(
            sink="yt-static",
            door=DOORS["yt-static"],
            options={**options, "path": static},
            cli=[static, *cli],
            read_ids=lambda: [r["id"] for r in yt.read_table(static)],
            damage=lambda: yt.write_table(static, []),  # the rows go, the proofs stay
        ),
    ]


def postgres_target(server):
    """A fresh database; the executors connect to the server themselves."""
    import psycopg

    database = "cluster_e2e"
    with psycopg.connect(server.url(), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {database}")
    url = server.url(database=database)

    def read_ids():
        with psycopg.connect(url) as conn:
            return [row[0] for row in conn.execute("SELECT id FROM public.orders")]

    def damage():  # a committed row deleted by hand: the proofs count more than the table holds
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DELETE FROM public.orders WHERE id = (SELECT min(id) FROM public.orders)")

    return Target(
        sink="postgres",
        door=DOORS["postgres"],
        options={"url": url, "table": "public.orders"},
        cli=["public.orders", "-o", f"url={url}"],
        read_ids=read_ids,
        damage=damage,
    )


def test_workers_then_driver_killed_mid_batch(
    spark_cluster, wheel_env, yt_emulator, postgres_server, tmp_path  # noqa: F811
):
    targets = file_targets(tmp_path) + yt_targets(yt_emulator)
    targets.append(postgres_target(postgres_server))
    assert set(DOORS.values()) == {"foreach_batch", "data_source"}
    workers_then_driver_killed(spark_cluster, wheel_env, tmp_path / "work", targets)


def test_files_on_s3_with_the_driver_restarted_mid_stream(spark_cluster, tmp_path):
    """``format("eosink-files")`` into S3, more batches than ``compact_interval``, the driver
    killed in the middle of batch 3 and the query restarted: every row exactly once.

    Spark plans each batch, writes it and commits it in different Python processes, and
    reuses them across batches: a process that listed ``_spark_metadata`` before other
    processes committed must not decide from that listing (it read ``_spark_metadata/1`` as
    gone: "disappeared while being read", surfacing as a ``PicklingError``).
    """
    work = tmp_path / "work"
    expected = write_source(work, files=6)
    read_back = tmp_path / "read_back.json"
    with s3_server() as endpoint:
        bucket = endpoint.create_bucket()
        options = {
            "path": f"s3://{bucket}/out",
            "compact_interval": "2",
            "storage.key": endpoint.access_key,
            "storage.secret": endpoint.secret_key,
            "storage.client_kwargs.endpoint_url": endpoint.url,
        }
        target = {"name": "files", "sink": "files", "door": "data_source", "options": options}
        job = {
            "master": spark_cluster.master_url,
            "conf": spark_cluster.spark_conf(),
            "targets": [{**target, "read_back": str(read_back)}],
        }
        arm(work, 3050)
        driver = start_driver(work, job)
        wait_reached(work, "files", 3050, driver)
        kill_driver(driver)
        arm(work, None)
        restarted = start_driver(work, job)
        assert restarted.wait(timeout=600) == 0, last_log(work)
        logs = endpoint.client().list_objects_v2(Bucket=bucket, Prefix="out/_spark_metadata/")
        names = {o["Key"].rsplit("/", 1)[-1] for o in logs.get("Contents", [])}
    assert {"1.compact", "3.compact", "5.compact"} <= names, names
    held = Counter(json.loads(read_back.read_text()))  # Spark's own reader
    assert held == Counter(expected), (
        f"duplicates: {sum(n - 1 for n in held.values() if n > 1)}, "
        f"lost: {len(set(expected) - set(held))}"
    )
