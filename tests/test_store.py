import json

import pandas as pd
import pyarrow as pa
import pytest
from deltalake import DeltaTable

from deepvm.base.errors import StoreError
from deepvm.cli import main
from deepvm.model.schemas import table_schema
from deepvm.store import TABLES, Store


def scaling_rows(n: int) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "run_id": ["r"] * n,
            "instance_type": ["g"] * n,
            "workload": ["w"] * n,
            "n_nodes": list(range(1, n + 1)),
            "duration_s": [10.0 / k for k in range(1, n + 1)],
            "speedup": [float(k) for k in range(1, n + 1)],
            "source": ["measured"] * n,
            "measured_at": [pd.Timestamp("2026-12-01", tz="UTC")] * n,
        }
    )


def test_rewrite_replaces_the_writers_rows_of_that_date_and_keeps_others(tmp_path):
    store = Store.open(tmp_path)
    store.write("scaling", scaling_rows(3), partition="2026-12-01")
    store.write("scaling", scaling_rows(2), partition="2026-12-02")
    store.write("scaling", scaling_rows(1), partition="2026-12-02", name="other")
    store.write("scaling", scaling_rows(4), partition="2026-12-02")
    df = Store.open(tmp_path).read("scaling")
    assert df.groupby("run_date").size().to_dict() == {"2026-12-01": 3, "2026-12-02": 5}
    # the superseded rows are deleted from the Delta table, not only hidden
    assert DeltaTable(tmp_path / "scaling").to_pyarrow_table().num_rows == 8


def test_rows_written_in_one_commit_read_back_in_the_order_written(tmp_path):
    # delta-rs writes a many-chunk Arrow table's chunks in parallel, so one
    # commit's parts could come back in either order (seen as a flaky CI failure:
    # a local and an S3 store of the same prices disagreed on row order)
    for attempt in range(6):
        store = Store.open(tmp_path / str(attempt))
        with store.transaction("test") as tx:
            tx.write("scaling", scaling_rows(3), partition="2026-12-01", name="a")
            tx.write("scaling", scaling_rows(5), partition="2026-12-01", name="b")
        got = Store.open(tmp_path / str(attempt)).read("scaling")
        assert got["n_nodes"].tolist() == [1, 2, 3, 1, 2, 3, 4, 5], attempt


def test_bad_rows_write_nothing_and_keep_old_data(tmp_path):
    store = Store.open(tmp_path)
    store.write("scaling", scaling_rows(2), partition="2026-12-01")
    version = DeltaTable(tmp_path / "scaling").version()
    with pytest.raises(ValueError, match="lack column"):
        store.write("scaling", scaling_rows(2).drop(columns="speedup"), partition="2026-12-01")
    bad = scaling_rows(2)
    bad["n_nodes"] = ["one", "two"]
    with pytest.raises(pa.ArrowInvalid):
        store.write("scaling", bad, partition="2026-12-01")
    assert DeltaTable(tmp_path / "scaling").version() == version
    assert len(Store.open(tmp_path).read("scaling")) == 2


def test_every_table_is_a_delta_table_of_this_schema_version(tmp_path):
    store = Store.open(tmp_path)
    for table, (column, schema) in TABLES.items():
        empty = schema.empty_table().to_pandas()
        store.write(table, empty, partition=None if column is None else "2026-12-02")
        found = DeltaTable(tmp_path / table)
        assert found.metadata().configuration["deepvm.schemaVersion"] == "3"
        assert pa.schema(found.schema().to_arrow()).names == table_schema(table).names
        assert store.read(table).shape[0] == 0
    assert Store.open(tmp_path).partitions("prices") == ["2026-12-02"]


def test_a_table_of_another_schema_version_is_named(tmp_path):
    DeltaTable.create(
        tmp_path / "scaling",
        table_schema("scaling"),
        configuration={"deepvm.schemaVersion": "9"},
        raise_if_key_not_exists=False,
    )
    with pytest.raises(
        StoreError, match=r"table 'scaling' is not a deepvm table of schema version 3"
    ):
        Store.open(tmp_path).write("scaling", scaling_rows(1), partition="2026-12-01")
    assert main(["store", "check", "--store", str(tmp_path)]) == 1


def test_env_store(tmp_path, monkeypatch):
    monkeypatch.setenv("DEEPVM_STORE", str(tmp_path / "env"))
    assert Store.open().uri == str(tmp_path / "env")
    assert Store.open(f"file://{tmp_path}/x").uri == f"{tmp_path}/x"


def test_store_check_names_every_bad_file(tmp_path, capsys):
    store = tmp_path / "s"
    assert main(["prices", "refresh", "--store", str(store), "--date", "2026-12-01"]) == 0
    capsys.readouterr()
    assert main(["store", "check", "--store", str(store), "--json"]) == 0
    good = json.loads(capsys.readouterr().out)
    assert good["ok"] and good["files"]["prices"] == 1 and good["rows"]["prices"] > 0
    (torn,) = (store / "prices").rglob("*.parquet")
    torn.write_bytes(b"PAR1 not really")
    (instances,) = (store / "instances").glob("*.parquet")
    instances.unlink()
    assert main(["store", "check", "--store", str(store), "--json"]) == 1
    found = json.loads(capsys.readouterr().out)
    assert not found["ok"]
    assert any(torn.name in b and "cannot be read" in b for b in found["bad"])
    assert any("instances" in b for b in found["bad"])
    assert main(["store", "check", "--store", str(tmp_path / "none")]) == 2


def test_the_commits_table_is_kept_to_a_few_files_without_store_compact(tmp_path, monkeypatch):
    # every reader reads the whole commits table first; a year of `nightly
    # --no-compact` left one file per night there (1.9x the nightly's CPU)
    import deepvm.store._commit as commit

    monkeypatch.setattr(commit, "COMMIT_FILES_MAX", 4)
    for day in range(1, 11):
        Store.open(tmp_path).write("scaling", scaling_rows(day), partition=f"2026-12-{day:02d}")
    assert len(DeltaTable(tmp_path / "commits").file_uris()) < 4
    got = Store.open(tmp_path).read("scaling")
    assert got.groupby("run_date").size().tolist() == list(range(1, 11))


def test_an_error_inside_a_transaction_names_the_store_by_its_path(tmp_path):
    """Regression: errors raised by a stage given the open transaction printed the
    Store object's repr instead of where the store is."""
    from deepvm.base.errors import DeepvmError
    from deepvm.records.inputs import catalog_from_store

    where = tmp_path / "team-store"
    with pytest.raises(DeepvmError) as raised, Store.open(where).transaction() as tx:
        catalog_from_store(tx, "2026-12-01")
    message = str(raised.value)
    assert f"store {str(where)!r} has no prices yet" in message
    assert "Store(" not in message and "object at 0x" not in message


def test_store_check_names_a_partition_folder_that_is_not_a_month(tmp_path, capsys):
    """A copy put in `prices/snapshot_month=garbage/` by hand: no reader sees its rows
    (Delta lists only its own files), and `store check` now says so."""
    import shutil

    from deepvm.cli import main

    store = tmp_path / "s"
    assert main(["prices", "refresh", "--store", str(store), "--date", "2026-12-01"]) == 0
    rows = Store.open(store).rows("prices").num_rows
    month = next((store / "prices").glob("snapshot_month=2026-12"))
    stray = store / "prices" / "snapshot_month=garbage"
    shutil.copytree(month, stray)
    capsys.readouterr()
    assert Store.open(store).rows("prices").num_rows == rows  # not doubled
    assert main(["store", "check", "--store", str(store)]) == 1
    out = capsys.readouterr().out
    assert "folder 'prices/snapshot_month=garbage' is not a month partition" in out
