"""The store (docs/ARCHITECTURE.md, "The store"): Delta Lake tables in a local
folder or under an object-store prefix, and the commits table that makes a night
whole for every reader.

The tables' columns are ``deepvm.model.schemas``, below the catalog. The modules,
bottom up: ``location`` (URIs, storage options), ``delta`` (calls into delta-rs),
``commit`` (the commit protocol), ``legacy`` (deepvm's earlier Parquet layout,
found and read), ``core`` (the Store: transactions, writes, reads),
``maintenance`` (compaction, retention, check), ``migrate`` (from the earlier
layout), ``export`` (whole nights as plain files), ``sql`` (the views SQL readers
paste). Names are
loaded on first use, so ``import deepvm.store`` does not import delta-rs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from deepvm.base.config import DEFAULT_STORE as DEFAULT_STORE
from deepvm.base.config import ENV_STORE as ENV_STORE
from deepvm.base.names import check_date as check_date

if TYPE_CHECKING:
    from deepvm.model.schemas import SCHEMA_VERSION, TABLES, describe_tables, month_column
    from deepvm.store._migrate import MigrateReport, migrate_store
    from deepvm.store.core import Store, StoreLike
    from deepvm.store.location import store_uri
    from deepvm.store.maintenance import CompactReport, StoreCheck, check_store

_LAZY = {
    "SCHEMA_VERSION": "deepvm.model.schemas",
    "TABLES": "deepvm.model.schemas",
    "describe_tables": "deepvm.model.schemas",
    "month_column": "deepvm.model.schemas",
    "Store": "deepvm.store.core",
    "StoreLike": "deepvm.store.core",
    "store_uri": "deepvm.store.location",
    "CompactReport": "deepvm.store.maintenance",
    "StoreCheck": "deepvm.store.maintenance",
    "check_store": "deepvm.store.maintenance",
    "MigrateReport": "deepvm.store._migrate",
    "migrate_store": "deepvm.store._migrate",
}

__all__ = [
    "DEFAULT_STORE",
    "ENV_STORE",
    "SCHEMA_VERSION",
    "TABLES",
    "CompactReport",
    "MigrateReport",
    "Store",
    "StoreCheck",
    "StoreLike",
    "check_date",
    "check_store",
    "describe_tables",
    "migrate_store",
    "month_column",
    "store_uri",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'deepvm.store' has no attribute {name!r}")
