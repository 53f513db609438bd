"""Reading a streaming query's checkpoint: the batch it runs and the query it belongs to.

Where Spark does not hand these to eosink (the data source's writer; ``foreachBatch`` on Spark
Connect), the checkpoint tells them: the offset log is written before a batch runs, and
``metadata`` holds the query id, which stays the same across restarts of the query.

A checkpoint on an object store is read from the store every time, never from a cache: Spark
reuses its Python workers across batches and fsspec keeps one filesystem, with a listings cache
that never expires, per process, so a cached listing of ``offsets`` would plan batch N as the
batch N-1 it saw before. And it is read with the settings Spark reaches it with (its Hadoop
configuration, :func:`hadoop_storage_options`); when those do not open it, the error says which
setting to give, without showing any secret.
"""

from __future__ import annotations

import json
import os
import posixpath
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from eosink.errors import ConfigurationError
from eosink.options import secret_values

#: Spark's prefix of Hadoop settings in its own configuration.
HADOOP_PREFIX = "spark.hadoop."

#: Hadoop settings (after ``spark.hadoop.``) that say how to reach an object store: what
#: eosink carries from Spark's configuration to the Python workers that read a checkpoint.
STORE_SETTING_PREFIXES = ("fs.s3a.", "fs.azure.", "fs.gs.")

#: Settings to name when a checkpoint cannot be read, per URL scheme.
_HINTS = {
    "s3": "spark.hadoop.fs.s3a.access.key and spark.hadoop.fs.s3a.secret.key (and "
    "spark.hadoop.fs.s3a.endpoint for a store other than AWS S3)",
    "abfs": "spark.hadoop.fs.azure.account.key.<account>.dfs.core.windows.net (or the "
    "fs.azure.sas.fixed.token / fs.azure.account.oauth2.client.* settings of that host)",
    "gs": "spark.hadoop.fs.gs.auth.service.account.json.keyfile",
}


def is_remote(path: str) -> bool:
    """Whether ``path`` is a URL of a store other than the local filesystem."""
    return "://" in path and not path.startswith("file:")


def _scheme(path: str) -> str:
    scheme = path.split("://", 1)[0].lower() if "://" in path else "file"
    return {"s3a": "s3", "s3n": "s3", "abfss": "abfs", "wasb": "abfs", "wasbs": "abfs"}.get(
        scheme, scheme
    )


def store_settings(conf: Mapping[str, str]) -> dict[str, str]:
    """The object-store entries of Spark's configuration (keys keep ``spark.hadoop.``)."""
    return {
        key: str(value)
        for key, value in conf.items()
        if key.startswith(HADOOP_PREFIX)
        and key[len(HADOOP_PREFIX) :].startswith(STORE_SETTING_PREFIXES)
        and str(value).strip()
    }


def spark_store_settings(spark: Any) -> dict[str, str]:
    """The object-store settings of a running session, as :func:`store_settings` keeps them.

    Spark's conf (``spark.hadoop.*``), then the live Hadoop configuration where the session has
    one (classic Spark; a job may set ``fs.s3a.*`` there directly), which is what Spark's own
    filesystem uses and so wins.
    """
    settings: dict[str, str] = {}
    try:
        conf = spark.conf.getAll
        settings.update(store_settings(conf() if callable(conf) else conf))
    except Exception:  # noqa: BLE001 - a session that cannot list its conf: defaults only
        pass
    try:
        hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    except Exception:  # noqa: BLE001 - Spark Connect: no Hadoop configuration on this side
        return settings
    for prefix in STORE_SETTING_PREFIXES:
        props = hadoop.getPropsWithPrefix(prefix)
        for key in props.keySet().toArray():
            value = props.get(key)
            if value is not None and str(value).strip():
                settings[f"{HADOOP_PREFIX}{prefix}{key}"] = str(value)
    return settings


def hadoop_storage_options(path: str, conf: Mapping[str, str]) -> dict[str, Any]:
    """fsspec options (s3fs, adlfs, gcsfs) for ``path`` from Spark's Hadoop settings.

    ``conf`` holds Spark configuration keys (``spark.hadoop.fs.s3a.access.key``...). Only
    settings of ``path``'s store and bucket/account are used; none at all for local paths.
    """
    if not is_remote(path):
        return {}
    hadoop = {k[len(HADOOP_PREFIX) :]: v for k, v in store_settings(conf).items()}
    scheme = _scheme(path)
    if scheme == "s3":
        return _s3_options(urlsplit(path).netloc, hadoop)
    if scheme == "abfs":
        return _azure_options(urlsplit(path).netloc, hadoop)
    if scheme == "gs":
        options: dict[str, Any] = {}
        if "fs.gs.auth.service.account.json.keyfile" in hadoop:
            options["token"] = hadoop["fs.gs.auth.service.account.json.keyfile"]
        if "fs.gs.project.id" in hadoop:
            options["project"] = hadoop["fs.gs.project.id"]
        return options
    return {}


def _s3_options(bucket: str, hadoop: Mapping[str, str]) -> dict[str, Any]:
    """S3A's settings, per-bucket ones (``fs.s3a.bucket.<bucket>.*``) first, as S3A does."""

    def setting(name: str) -> str | None:
        return hadoop.get(f"fs.s3a.bucket.{bucket}.{name}", hadoop.get(f"fs.s3a.{name}"))

    options: dict[str, Any] = {}
    client: dict[str, Any] = {}
    names = (("access.key", "key"), ("secret.key", "secret"), ("session.token", "token"))
    for name, option in names:
        value = setting(name)
        if value:
            options[option] = value
    endpoint = setting("endpoint")
    if endpoint:
        if "://" not in endpoint:
            ssl = (setting("connection.ssl.enabled") or "true").lower() != "false"
            endpoint = f"{'https' if ssl else 'http'}://{endpoint}"
        client["endpoint_url"] = endpoint
    region = setting("endpoint.region")
    if region:
        client["region_name"] = region
    if client:
        options["client_kwargs"] = client
    if (setting("path.style.access") or "false").lower() == "true":
        options["config_kwargs"] = {"s3": {"addressing_style": "path"}}
    return options


def _azure_options(netloc: str, hadoop: Mapping[str, str]) -> dict[str, Any]:
    """ABFS/WASB settings keyed by the account's host (``container@account.dfs.core...``)."""
    host = netloc.rsplit("@", 1)[-1]
    account = host.split(".", 1)[0]
    options: dict[str, Any] = {"account_name": account} if account else {}
    key = hadoop.get(f"fs.azure.account.key.{host}")
    sas = hadoop.get(f"fs.azure.sas.fixed.token.{host}")
    client_id = hadoop.get(f"fs.azure.account.oauth2.client.id.{host}")
    if key:
        options["account_key"] = key
    elif sas:
        options["sas_token"] = sas
    elif client_id:
        options["client_id"] = client_id
        options["client_secret"] = hadoop.get(f"fs.azure.account.oauth2.client.secret.{host}", "")
        endpoint = hadoop.get(f"fs.azure.account.oauth2.client.endpoint.{host}", "")
        # https://login.microsoftonline.com/<tenant>/oauth2/token
        parts = [p for p in urlsplit(endpoint).path.split("/") if p]
        if parts:
            options["tenant_id"] = parts[0]
    return options if len(options) > 1 else {}


def _remote_fs(path: str, storage_options: Mapping[str, Any]) -> tuple[Any, str]:
    import fsspec  # only for checkpoints outside the local filesystem

    url = "s3://" + path.split("://", 1)[1] if _scheme(path) == "s3" else path
    # use_listings_cache=False: this filesystem never answers from a listing made earlier.
    return fsspec.core.url_to_fs(url, use_listings_cache=False, **dict(storage_options))


def _denied(path: str, exc: Exception, storage_options: Mapping[str, Any]) -> ConfigurationError:
    text = f"{type(exc).__name__}: {exc}"
    for secret in secret_values(dict(storage_options)):
        text = text.replace(secret, "***")
    hint = _HINTS.get(_scheme(path), "the credentials of this store in Spark's configuration")
    return ConfigurationError(
        f"cannot read the checkpoint {path!r} ({text}). eosink reads the checkpoint with the "
        f"settings Spark reaches it with, taken from Spark's configuration when "
        f"eosink.register_data_sources(spark) runs: set {hint} in the session's configuration "
        "before registering"
    )


def _is_access_error(exc: Exception) -> bool:
    return isinstance(exc, PermissionError) or "Credential" in type(exc).__name__


def _read_text(path: str, storage_options: Mapping[str, Any]) -> str:
    if is_remote(path):
        try:
            fs, key = _remote_fs(path, storage_options)
            with fs.open(key, "r") as f:
                return str(f.read())
        except FileNotFoundError:
            raise
        except Exception as exc:
            if _is_access_error(exc):
                raise _denied(path, exc, storage_options) from None
            raise
    with open(path.removeprefix("file:"), encoding="utf-8") as f:
        return f.read()


def _list_names(path: str, storage_options: Mapping[str, Any]) -> list[str]:
    if is_remote(path):
        try:
            fs, root = _remote_fs(path, storage_options)
            return [posixpath.basename(p.rstrip("/")) for p in fs.ls(root, detail=False)]
        except FileNotFoundError:
            raise
        except Exception as exc:
            if _is_access_error(exc):
                raise _denied(path, exc, storage_options) from None
            raise
    return os.listdir(path.removeprefix("file:"))


def stream_position(
    checkpoint: str, storage_options: Mapping[str, Any] | None = None
) -> tuple[int, str | None]:
    """The batch id Spark is running (latest offset log entry) and the query id of a checkpoint.

    ``storage_options``: fsspec options of the checkpoint's store (see
    :func:`hadoop_storage_options`); fsspec's defaults where empty.
    """
    options = storage_options or {}
    try:
        batches = [
            int(n)
            for n in _list_names(posixpath.join(checkpoint, "offsets"), options)
            if n.isdigit()
        ]
    except FileNotFoundError:
        batches = []
    if not batches:
        raise ConfigurationError(
            f"checkpoint {checkpoint!r} holds no offset log: set checkpointLocation on the query"
        )
    return max(batches), query_id_of(checkpoint, options)


def query_id_of(checkpoint: str, storage_options: Mapping[str, Any] | None = None) -> str | None:
    """The id of the query a checkpoint belongs to (Spark writes it to ``metadata`` at start)."""
    try:
        text = _read_text(posixpath.join(checkpoint, "metadata"), storage_options or {})
        return json.loads(text).get("id")
    except (OSError, ValueError) as exc:
        if isinstance(exc, ConfigurationError):
            raise
        return None


def batch_offsets(
    checkpoint: str, batch_id: int, storage_options: Mapping[str, Any] | None = None
) -> list[Any | None]:
    """The end offsets of batch ``batch_id``, one per source of the query, as Spark logged them.

    Spark writes ``offsets/<batch id>`` before the batch runs: a version line (``v1``), a line
    of batch metadata, then one line per source in the query's source order: that source's end
    offset as JSON, or ``-`` for a source the batch did not read from. Each source line comes
    back parsed (``None`` for ``-``): what the JSON means is its source's business, so a sink
    that knows a source's format can act on the batch's position in it (e.g. move that
    source's consumer in the same transaction as the batch's rows).

    ``storage_options`` as for :func:`stream_position`. A missing entry, or one that is not
    Spark's offset log, is a :class:`~eosink.errors.ConfigurationError`.
    """
    path = posixpath.join(checkpoint, "offsets", str(int(batch_id)))
    try:
        text = _read_text(path, storage_options or {})
    except FileNotFoundError:
        raise ConfigurationError(
            f"checkpoint {checkpoint!r} holds no offset log entry for batch {batch_id}"
        ) from None
    lines = text.splitlines()
    if len(lines) < 2 or not lines[0].startswith("v"):
        raise ConfigurationError(
            f"{path!r} is not an entry of Spark's offset log (a version line, the batch's "
            "metadata, then one line per source)"
        )
    out: list[Any | None] = []
    for line in lines[2:]:
        line = line.strip()
        if not line:
            continue
        if line == "-":
            out.append(None)
            continue
        try:
            out.append(json.loads(line))
        except ValueError:
            raise ConfigurationError(
                f"{path!r}: a source's offset is not JSON: {line[:80]!r}"
            ) from None
    return out


def session_storage_options(checkpoint: str) -> dict[str, Any]:
    """fsspec options for ``checkpoint`` from the active Spark session's settings, for code
    that runs next to the driver but is handed no options (a sink's ``commit``): ``{}`` for
    a local checkpoint, and where no session is active (Spark's commit worker of a data
    source): fsspec's defaults, e.g. the store's credentials from the environment."""
    if not is_remote(checkpoint):
        return {}
    try:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
    except Exception:  # noqa: BLE001 - no pyspark, or no session in this process
        spark = None
    return hadoop_storage_options(checkpoint, spark_store_settings(spark)) if spark else {}
