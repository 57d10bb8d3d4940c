import shutil
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

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


def test_rewrite_replaces_partition_file_and_keeps_others(tmp_path):
    store = Store.open(tmp_path)
    store.write("scaling", scaling_rows(3), partition="2026-12-01")
    store.write("scaling", scaling_rows(2), partition="2026-12-02")
    store.write("scaling", scaling_rows(4), partition="2026-12-02")
    df = store.read("scaling")
    assert df.groupby("run_date").size().to_dict() == {"2026-12-01": 3, "2026-12-02": 4}
    assert not list(tmp_path.rglob(".tmp-*"))


def test_bad_rows_write_nothing_and_keep_old_data(tmp_path):
    store = Store.open(tmp_path)
    path = Path(store.write("scaling", scaling_rows(2), partition="2026-12-01"))
    before = path.read_bytes()
    with pytest.raises(ValueError, match="lack column"):
        store.write("scaling", scaling_rows(2).drop(columns="speedup"), partition="2026-12-01")
    bad = scaling_rows(2)
    bad["n_nodes"] = ["one", "two"]
    with pytest.raises(Exception):  # noqa: B017 - pyarrow's conversion error
        store.write("scaling", bad, partition="2026-12-01")
    assert path.read_bytes() == before
    assert not list(tmp_path.rglob(".tmp-*"))


def test_every_table_has_schema_metadata(tmp_path):
    store = Store.open(tmp_path)
    for table, (column, schema) in TABLES.items():
        empty = schema.empty_table().to_pandas()
        path = store.write(table, empty, partition=None if column is None else "2026-12-02")
        meta = pq.read_schema(path).metadata
        assert meta[b"schema_version"] == b"2" and meta[b"table"] == table.encode()
        assert store.read(table).shape[0] == 0


def test_env_store(tmp_path, monkeypatch):
    monkeypatch.setenv("DEEPVM_STORE", str(tmp_path / "env"))
    assert Store.open().uri == str(tmp_path / "env")
    assert Store.open(f"file://{tmp_path}/x").uri == f"{tmp_path}/x"


def test_store_check_names_every_bad_file(tmp_path, capsys):
    import json

    from deepvm.cli import main

    store = tmp_path / "s"
    assert main(["prices", "refresh", "--store", str(store), "--date", "2026-12-01"]) == 0
    capsys.readouterr()
    assert main(["store", "check", "--store", str(store), "--json"]) == 0
    good = json.loads(capsys.readouterr().out)
    assert good["ok"] and good["files"]["prices"] == 1 and good["rows"]["prices"] > 0
    folder = store / "prices" / "snapshot_date=2026-12-02"  # the version-1 layout
    folder.mkdir(parents=True)
    (folder / "part-torn.parquet").write_bytes(b"PAR1 not really")
    foreign = store / "fleet" / "snapshot_month=2026-12"  # a prices file in the fleet table
    foreign.mkdir(parents=True)
    prices = store / "prices" / "snapshot_month=2026-12" / "part-2026-12-01-snapshot.parquet"
    shutil.copy(prices, foreign / "part-2026-12-01-x.parquet")
    assert main(["store", "check", "--store", str(store), "--json"]) == 1
    found = json.loads(capsys.readouterr().out)
    assert not found["ok"] and len(found["bad"]) == 2
    assert any("part-torn.parquet" in b and "not a readable Parquet" in b for b in found["bad"])
    assert any("01-x.parquet" in b and "not a deepvm 'fleet' file" in b for b in found["bad"])
    assert main(["store", "check", "--store", str(tmp_path / "none")]) == 2
