"""The store's rows as SQL sees them: the rows of completed commits only, as
deepvm's own readers see them (docs/ARCHITECTURE.md, "The store"). Downstream
readers (DuckDB, Spark, Trino) join a table on the commits table the same way."""

from __future__ import annotations

from typing import Any

from deepvm.schemas import COMMIT_ID, COMMITS, COMMITS_SCHEMA, TABLES, WRITER, table_schema


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
    extension is needed). As deepvm's readers do, it reads the commits table first
    and ``table`` at the newest version recorded there: a commit that completes in
    between cannot hide rows it superseded."""
    import duckdb
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    from deepvm.store.core import Store

    location = Store.open(uri).location
    con = connection or duckdb.connect()
    commits = COMMITS_SCHEMA.empty_table()
    found = DeltaTable.is_deltatable(location.table_uri(COMMITS), location.options)
    if found:
        commits = DeltaTable(location.table_uri(COMMITS), storage_options=location.options)
        commits = commits.to_pyarrow_table()
    con.register(COMMITS, commits)
    mine = commits.filter(pc.equal(commits["table_name"], table))["table_version"]
    version = pc.max(mine).as_py() if len(mine) else None
    if version is None:  # no completed commit: no rows
        con.register(table, table_schema(table).empty_table())
    else:
        rows = DeltaTable(
            location.table_uri(table), version=version, storage_options=location.options
        )
        con.register(table, rows.to_pyarrow_dataset())
    return con.sql(whole_rows_sql(table))
