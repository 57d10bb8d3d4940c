"""The store's rows as SQL sees them: the rows of completed commits only, as
deepvm's own readers see them (docs/ARCHITECTURE.md, "The store"). Downstream
readers (DuckDB, Spark, Trino) join a table on the commits table the same way."""

from __future__ import annotations

from typing import Any

from deepvm.store.schemas import COMMIT_ID, COMMITS, COMMITS_SCHEMA, TABLES, WRITER, table_schema


def whole_rows_sql(table: str) -> str:
    """SQL over two relations, ``table`` and ``commits`` (each the Delta table of
    that name), that keeps the rows of the newest completed commit per (date,
    writer): a night, a recommend run, a benchmark run, whole or not at all."""
    column = TABLES[table][0]
    same_date = f"t.{column} is not distinct from c.date" if column else "c.date is null"
    return f"""
select t.* from {table} t join (
  select {COMMIT_ID}, date, {WRITER} from (
    select {COMMIT_ID}, date, {WRITER}, row_number() over (
      partition by date, {WRITER} order by committed_at desc, {COMMIT_ID} desc) as newest
    from {COMMITS} where table_name = '{table}')
  where newest = 1
) c on t.{COMMIT_ID} = c.{COMMIT_ID} and t.{WRITER} = c.{WRITER} and {same_date}"""


def duckdb_relation(uri: Any, table: str, connection: Any = None) -> Any:
    """A DuckDB relation of ``table``'s whole rows in the store at ``uri`` (needs the
    duckdb package; reads the Delta tables as pyarrow datasets, so no DuckDB
    extension is needed)."""
    import duckdb
    from deltalake import DeltaTable

    from deepvm.store.core import Store

    store = Store.open(uri)
    con = connection or duckdb.connect()
    for name, schema in ((table, table_schema(table)), (COMMITS, COMMITS_SCHEMA)):
        uri, options = store.location.table_uri(name), store.location.options
        if DeltaTable.is_deltatable(uri, storage_options=options):
            con.register(name, DeltaTable(uri, storage_options=options).to_pyarrow_dataset())
        else:  # not written yet: no rows
            con.register(name, schema.empty_table())
    return con.sql(whole_rows_sql(table))
