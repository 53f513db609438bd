"""The catalog and the table, loaded from the sink's options, with errors that name the fix.

The catalog is pyiceberg's, built from the ``catalog`` properties (one per process and
configuration: a SQL catalog holds a connection pool). Tables are always loaded afresh from the
catalog: whatever decides a batch (its proof, the current snapshot) is read at that moment.
Errors never show the catalog's properties: they may hold credentials.
"""

from __future__ import annotations

import threading
from typing import Any

from eosink.plugin import ConfigurationError, SinkError
from eosink.options import secret_values

from eosink_iceberg.avro_doubles import use_exact_doubles
from eosink_iceberg.options import IcebergOptions, mask_uri, query_secrets

_CATALOGS: dict[tuple[str, tuple[tuple[str, str], ...]], Any] = {}
_LOCK = threading.Lock()


def scrub(text: str, options: IcebergOptions) -> str:
    """``text`` without the catalog's credentials (errors of clients may quote them)."""
    for value in options.catalog.values():
        shown = mask_uri(value)
        if shown != value:
            text = text.replace(value, shown)
    secrets = secret_values(options.catalog)
    for value in options.catalog.values():
        secrets += query_secrets(value)
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def catalog_of(options: IcebergOptions) -> Any:
    """The pyiceberg catalog the options describe (cached per process)."""
    from pyiceberg.catalog import load_catalog

    use_exact_doubles()  # before any manifest is read (module doc of avro_doubles)

    key = (options.catalog_name, tuple(sorted(options.catalog.items())))
    with _LOCK:
        catalog = _CATALOGS.get(key)
        if catalog is None:
            try:
                catalog = load_catalog(options.catalog_name, **options.catalog)
            except Exception as exc:  # noqa: BLE001 - any client error: say what to fix
                raise ConfigurationError(
                    f"sink 'iceberg': cannot open the catalog {options.catalog_name!r} "
                    f"({type(exc).__name__}: {scrub(str(exc), options)}); check the catalog "
                    "properties (type, uri, warehouse, credentials)"
                ) from None
            _CATALOGS[key] = catalog
    return catalog


def load(options: IcebergOptions) -> Any | None:
    """The table, freshly loaded; ``None`` when it does not exist."""
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    catalog = catalog_of(options)
    try:
        return catalog.load_table(options.table)
    except (NoSuchTableError, NoSuchNamespaceError):
        return None
    except Exception as exc:  # noqa: BLE001
        raise SinkError(
            f"sink 'iceberg': cannot load table {options.table} from catalog "
            f"{options.catalog_name!r}: {type(exc).__name__}: {scrub(str(exc), options)}"
        ) from None


def namespace_exists(options: IcebergOptions) -> bool:
    catalog = catalog_of(options)
    try:
        return bool(catalog.namespace_exists(options.namespace))
    except Exception:  # noqa: BLE001 - a catalog without namespace listing: let create say
        return True


def create(options: IcebergOptions, schema: Any, spec: Any) -> Any:
    """Create the table (and its namespace if asked); another writer's creation wins."""
    from pyiceberg.exceptions import NamespaceAlreadyExistsError, NoSuchNamespaceError

    catalog = catalog_of(options)
    if not namespace_exists(options):
        if not options.create_namespace:
            raise ConfigurationError(
                f"sink 'iceberg': namespace {options.namespace!r} does not exist in catalog "
                f"{options.catalog_name!r}; create it, or set create_namespace=true. Nothing was "
                "written."
            )
        try:
            catalog.create_namespace(options.namespace)
        except NamespaceAlreadyExistsError:
            pass
        except Exception:  # a SQL catalog's unique key, when another writer won the race
            if not namespace_exists(options):
                raise
    try:
        return catalog.create_table_if_not_exists(
            options.table,
            schema=schema,
            partition_spec=spec,
            properties={"format-version": str(options.format_version)},
        )
    except NoSuchNamespaceError:
        raise ConfigurationError(
            f"sink 'iceberg': namespace {options.namespace!r} does not exist; create it, or set "
            "create_namespace=true. Nothing was written."
        ) from None
    except Exception:
        # another writer created it at the same moment (the SQL catalog's unique key, or its
        # compare-and-swap): theirs is checked by the caller
        table = load(options)
        if table is None:
            raise
        return table
