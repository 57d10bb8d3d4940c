"""The store's tables as SQL sees them (docs/ARCHITECTURE.md, "The store"): text a
user pastes into DuckDB, Spark SQL or polars' SQL context.

Every deepvm commit replaces a table's rows of a date and writer in one Delta
commit, so any Delta reader of a table's newest version reads whole nights:

- :func:`history_sql`: every night of a table (the nightly record only, for the
  tables that also hold on-demand what-if runs);
- :func:`current_night_sql`: the newest night;
- :func:`whole_rows_sql`: the rows of the newest completed deepvm commit per
  (date, writer), through the commits table: for readers that join two tables
  and want both from the same run, and for deepvm's own DuckDB view
  (:func:`duckdb_relation`).
"""

from __future__ import annotations

from typing import Any, Literal

from deepvm.model.schemas import COMMIT_ID, COMMITS, COMMITS_SCHEMA, TABLES, WRITER, table_schema

__all__ = [
    "DIALECTS",
    "current_night_sql",
    "delta_source",
    "duckdb_relation",
    "history_sql",
    "whole_rows_sql",
]

Dialect = Literal["duckdb", "spark", "polars"]
DIALECTS: tuple[Dialect, ...] = ("duckdb", "spark", "polars")
_NIGHTLY = ("recommendations", "fleet")  # tables that hold what-if runs beside the night


def delta_source(uri: str, table: str, dialect: Dialect) -> str:
    """How ``dialect`` names the Delta table ``table`` of the store at ``uri``:
    DuckDB's delta extension, Spark's ``delta.`path```, or (polars) the name the
    frame is registered under in a ``pl.SQLContext``."""
    path = f"{uri.rstrip('/')}/{table}"
    if dialect == "duckdb":
        return "delta_scan('" + path.replace("'", "''") + "')"
    if dialect == "spark":
        return "delta.`" + path.replace("`", "``") + "`"
    return table


def _check(table: str) -> str | None:
    if table not in TABLES:
        raise KeyError(f"no table {table!r}; the tables: {', '.join(TABLES)}")
    return TABLES[table][0]


def history_sql(table: str, source: str | None = None) -> str:
    """Every night of ``table`` (``source``: how the query names it; default the
    table's name): for recommendations and fleet the nightly record only."""
    _check(table)
    where = " where run_kind = 'nightly'" if table in _NIGHTLY else ""
    return f"select * from {source or table}{where}"


def current_night_sql(table: str, source: str | None = None) -> str:
    """The newest night of a dated ``table``: its rows of the newest date (for
    recommendations and fleet, of the nightly record)."""
    column = _check(table)
    if column is None:
        raise KeyError(f"table {table!r} has no dates: read it whole (history_sql)")
    name = source or table
    nightly = " and run_kind = 'nightly'" if table in _NIGHTLY else ""
    newest = f"select max({column}) from {name}" + (
        " where run_kind = 'nightly'" if table in _NIGHTLY else ""
    )
    return f"select * from {name} where {column} in ({newest}){nightly}"


def whole_rows_sql(table: str, source: str | None = None, commits: str | None = None) -> str:
    """SQL over two relations, ``table`` and ``commits`` (each the Delta table of
    that name), that keeps the rows of the newest completed commit per (date,
    writer): a night, a recommend run, a benchmark run, whole or not at all.
    ``source`` and ``commits``: how the query reads them (default: relations of
    those names)."""
    column = _check(table)
    same_date = f"t.{column} is not distinct from c.date" if column else "c.date is null"
    named = [(table, source), (COMMITS, commits)]
    ctes = ", ".join(f"{name} as (select * from {src})" for name, src in named if src)
    return (
        (f"with {ctes}" if ctes else "")
        + f"""
select t.* from {table} t join (
  select {COMMIT_ID}, date, {WRITER} from (
    select {COMMIT_ID}, date, {WRITER}, row_number() over (
      partition by date, {WRITER} order by committed_at desc, {COMMIT_ID} desc) as newest
    from {COMMITS} where table_name = '{table}')
  where newest = 1
) c on t.{COMMIT_ID} = c.{COMMIT_ID} and t.{WRITER} = c.{WRITER} and {same_date}"""
    )


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
