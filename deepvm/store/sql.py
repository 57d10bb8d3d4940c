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
    """A DuckDB relation of ``table``'s whole rows in the store at ``uri``: the rows
    deepvm's own reader reads (needs the duckdb package; reads the Delta tables as
    pyarrow datasets, so no DuckDB extension is needed). As deepvm's readers do, it
    reads the commits table first and ``table`` at the newest version recorded
    there, so a commit that completes in between cannot hide rows it superseded;
    the few newest commits' rows that version does not hold (a killed run's write
    over them, or a concurrent run's that the winner wrote over later) are read
    where those commits recorded them (``Store.pinned``)."""
    import duckdb
    import pyarrow as pa

    from deepvm.store.core import Store

    store = Store.open(uri)
    con = connection or duckdb.connect()
    # one read of the commits for both: the commits registered and the version pinned
    done = store.completed_commits()
    dates = done["date"].where(done["date"] != "", None)  # "": an undated table's
    commits = pa.Table.from_pandas(done.assign(date=dates), preserve_index=False)
    commits = commits.select(COMMITS_SCHEMA.names).cast(COMMITS_SCHEMA)
    found, elsewhere = store.pinned(table)
    con.register(COMMITS, commits)
    con.register("_deepvm_elsewhere", elsewhere)
    if found is None:  # no completed commit: no rows
        con.register(table, table_schema(table).empty_table())
    else:
        con.register("_deepvm_pinned", found.to_pyarrow_dataset())
        con.sql(
            "select * from _deepvm_pinned union all by name select * from _deepvm_elsewhere"
        ).create_view(table)
    return con.sql(whole_rows_sql(table))
