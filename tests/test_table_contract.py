"""The store's tables as a contract for downstream readers (docs/TABLES.md): every
column documented with its unit and meaning, columns only ever added, the
contract printed by `deepvm store schema`, whole nights exported as plain files,
and the SQL views a user pastes, run for real."""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from tests_paths import ROOT

from deepvm.cli import main
from deepvm.model.columns import contract, contract_markdown, contracts
from deepvm.model.schemas import COMMITS, SCHEMA_VERSION, TABLES, table_schema
from deepvm.store import Store
from deepvm.store.sql import current_night_sql, history_sql, whole_rows_sql

FROZEN = ROOT / "tests" / "data" / f"table-contract-v{SCHEMA_VERSION}.json"


def test_every_column_of_every_table_has_a_unit_and_a_meaning():
    seen = contracts()
    assert [t.name for t in seen] == [COMMITS, *TABLES]
    for table in seen:
        names = [c.name for c in table.columns]
        expected = table_schema(table.name).names if table.name in TABLES else None
        if expected is not None:
            assert names == expected, table.name
        for column in table.columns:
            assert column.meaning and len(column.meaning) > 8, (table.name, column.name)


def test_columns_are_only_ever_added():
    """Every column of the schema version's frozen contract is still there with
    its type: a rename or a new type fails here (it needs a new schema version
    and a migration step, with its test)."""
    frozen = json.loads(FROZEN.read_text())
    assert frozen["schema_version"] == SCHEMA_VERSION, "a new schema version needs a migration"
    now = {t.name: {c.name: c.type for c in t.columns} for t in contracts()}
    for table, columns in frozen["tables"].items():
        assert table in now, f"table {table!r} was removed"
        for name, arrow_type in columns.items():
            assert now[table].get(name) == arrow_type, (table, name, arrow_type)


def test_docs_tables_is_the_printed_contract():
    text = (ROOT / "docs" / "TABLES.md").read_text()
    body = text[text.index("Schema version") :]
    assert body == contract_markdown(contracts())


def test_store_schema_prints_the_contract(capsys):
    assert main(["store", "schema", "fleet", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    (fleet,) = out["tables"]
    assert fleet["partitioned_by"] == ["snapshot_month"] and fleet["date_column"] == "snapshot_date"
    cost = next(c for c in fleet["columns"] if c["name"] == "hourly_cost")
    assert cost == {**cost, "type": "double", "unit": "USD/h"}
    assert main(["store", "schema"]) == 0
    markdown = capsys.readouterr().out
    assert markdown == contract_markdown(contracts())
    assert len(re.findall(r"^### ", markdown, re.M)) == len(TABLES) + 1
    assert main(["store", "schema", "fleets"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'fleets' is not a table" in err[0]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """Three nights (one re-run) and an on-demand what-if run."""
    path = tmp_path_factory.mktemp("contract") / "s"
    for date in ("2026-11-30", "2026-12-01", "2026-12-02", "2026-12-01"):
        assert main(["-q", "nightly", "--store", str(path), "--date", date, "--no-compact"]) == 0
    assert main(["-q", "recommend", "--budget", "3", "--store", str(path), "--json"]) == 0
    return path


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_the_export_holds_exactly_the_rows_deepvm_reads(store, tmp_path, fmt, capsys):
    out = tmp_path / "out"
    argv = ["store", "export", "--store", str(store), "--table", "recommendations"]
    assert main([*argv, "--format", fmt, "--out", str(out), "--json"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["dates"] == ["2026-11-30", "2026-12-01", "2026-12-02"]
    assert sorted(p.name for p in (out / "recommendations").iterdir()) == [
        f"{d}.{fmt}" for d in done["dates"]
    ]
    reader = "read_parquet" if fmt == "parquet" else "read_csv_auto"
    exported = duckdb.sql(
        f"select scenario, policy, rank, hourly_cost, writer, commit_id, "
        f"cast(snapshot_date as varchar) as day from {reader}('{out}/recommendations/*.{fmt}')"
    ).fetchall()
    rows = Store.open(store).read("recommendations")
    full = Store.open(store).rows("recommendations").to_pandas()
    expected = [
        (s, p, r, c, w, k, str(d))
        for s, p, r, c, w, k, d in zip(
            full["scenario"],
            full["policy"],
            full["rank"],
            full["hourly_cost"],
            full["writer"],
            full["commit_id"],
            full["snapshot_date"],
            strict=True,
        )
    ]
    assert len(rows) == done["rows"] == len(exported)
    assert sorted(exported, key=str) == sorted(expected, key=str)
    # --since: the later dates only; an export again replaces the files whole
    assert main([*argv, "--out", str(out), "--since", "2026-12-01", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["dates"] == ["2026-12-01", "2026-12-02"]


def test_export_refuses_bad_input_in_one_line_and_writes_nothing(store, tmp_path, capsys):
    out = tmp_path / "out"
    cases = [
        (["--table", "instances", "--since", "2026-12-01"], "has no dates"),
        (["--table", "fleet", "--since", "2026-13-01"], "since"),
        (["--table", "fleets"], "'fleets' is not a table"),
    ]
    for extra, named in cases:
        argv = ["store", "export", "--store", str(store), "--out", str(out), *extra]
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and named in err[0], err
    assert not out.exists()


def _registered(store: Path) -> duckdb.DuckDBPyConnection:
    """DuckDB with each Delta table's newest version registered as a relation (the
    delta extension is not installed here; the SQL around it is the same)."""
    con = duckdb.connect()
    for table in ("recommendations", "fleet", COMMITS):
        con.register(f"{table}_delta", DeltaTable(store / table).to_pyarrow_dataset())
    return con


def test_the_sql_views_run_on_duckdb_and_polars(store, capsys):
    con = _registered(store)
    nightly = Store.open(store).read("fleet")
    nightly = nightly[nightly["run_kind"] == "nightly"]
    history = con.sql(history_sql("fleet", "fleet_delta")).df()
    assert len(history) == len(nightly) and set(history["run_kind"]) == {"nightly"}
    current = con.sql(current_night_sql("fleet", "fleet_delta")).df()
    assert {str(d)[:10] for d in current["snapshot_date"]} == {"2026-12-02"}
    assert len(current) == (nightly["snapshot_date"] == "2026-12-02").sum()
    # recommendations hold a what-if run (recommend --store) dated by the newest
    # prices, beside the night: the current night is the nightly record alone
    dated = Store.open(store).read("recommendations")
    assert set(dated.loc[dated["snapshot_date"] == "2026-12-02", "run_kind"]) == {
        "nightly",
        "what-if",
    }
    night = con.sql(current_night_sql("recommendations", "recommendations_delta")).df()
    assert (
        set(night["run_kind"]) == {"nightly"}
        and len(night)
        == ((dated["snapshot_date"] == "2026-12-02") & (dated["run_kind"] == "nightly")).sum()
    )
    recs = con.sql(whole_rows_sql("recommendations", "recommendations_delta", "commits_delta"))
    assert len(recs.df()) == len(Store.open(store).read("recommendations"))
    # the text `deepvm store sql --dialect polars` prints, run as a user pastes it
    assert main(["store", "sql", "fleet", "--view", "current", "--dialect", "polars"]) == 0
    text = [line for line in capsys.readouterr().out.splitlines() if not line.startswith("--")]
    context = pl.SQLContext(fleet=pl.scan_delta(str(store / "fleet")))
    got = context.execute("\n".join(text), eager=True)
    assert got.height == len(current) and set(got["run_kind"]) == {"nightly"}
    assert main(["store", "sql", "instances", "--view", "current"]) == 2
    assert "has no dates" in capsys.readouterr().err


def test_a_plain_reader_of_a_table_reads_what_the_export_holds(store, tmp_path):
    """The newest Delta version of a table, read with no knowledge of deepvm's
    commits, holds the very rows deepvm reads (each re-run replaced its date in
    one Delta commit)."""
    assert (
        main(
            [
                "-q",
                "store",
                "export",
                "--store",
                str(store),
                "--table",
                "prices",
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    exported = pa.concat_tables(
        pq.read_table(p) for p in sorted((tmp_path / "prices").glob("*.parquet"))
    )
    plain = DeltaTable(store / "prices").to_pyarrow_table()
    key = ["snapshot_date", "writer", "commit_id", "instance_type", "zone", "market"]
    assert sorted(exported.select(key).to_pylist(), key=str) == sorted(
        plain.select(key).to_pylist(), key=str
    )
    assert contract("prices").partition_column == "snapshot_month"
