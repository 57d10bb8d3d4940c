"""deepvm.base.tables reads CSVs without pandas: it must read what pandas reads."""

import math
from pathlib import Path

import pandas as pd
import pytest

from deepvm.base.errors import InputError
from deepvm.base.tables import Table, numeric_column, read_table, text_column

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = sorted((ROOT / "datasets").rglob("*.csv"))


def same_cell(ours: object, theirs: object) -> bool:
    if theirs is None or (isinstance(theirs, float) and math.isnan(theirs)):
        return ours is None or (isinstance(ours, float) and math.isnan(ours))
    if isinstance(theirs, (int, float)) and not isinstance(theirs, bool):
        return float(str(ours)) == float(theirs)
    return str(ours).strip() == str(theirs).strip()


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_every_shipped_csv_reads_as_pandas_reads_it(path):
    ours = read_table(path, (), "test")
    lines = path.read_text().splitlines()
    comments = next(k for k, line in enumerate(lines) if not line.startswith("#"))
    theirs = pd.read_csv(path, skipinitialspace=True, skiprows=comments)
    assert ours.names == [str(c).strip() for c in theirs.columns]
    assert len(ours) == len(theirs) > 0
    for name in ours.names:
        pairs = zip(ours[name], theirs[name].astype(object), strict=True)
        assert all(same_cell(a, b) for a, b in pairs), name


def test_quotes_spaces_bom_and_missing_cells(tmp_path):
    f = tmp_path / "t.csv"
    f.write_text('\ufeffname, value ,note\n"a, b", 1.5,\n c ,NA,"said ""hi"""\n\n', "utf-8")
    table = read_table(f, ("name", "value"), "test")
    assert table.names == ["name", "value", "note"]
    assert list(text_column(table, "name", "test", key="")) == ["a, b", "c"]
    values = numeric_column(table, "value", "test", allow_missing=True, key="")
    assert values[0] == 1.5 and math.isnan(values[1])
    assert list(table["note"]) == [None, 'said "hi"']


def test_a_row_longer_than_the_header_is_named(tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("a,b\n1,2\n1,2,3\n")
    with pytest.raises(InputError, match=r"cannot be read: row 2 has 3 fields, the header 2"):
        read_table(f, ("a",), "test")


def test_an_empty_file_says_it_needs_a_header(tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("")
    with pytest.raises(InputError, match="the file is empty"):
        read_table(f, ("a",), "test")


def test_parquet_and_frames_round_trip(tmp_path):
    df = pd.DataFrame({"instance_type": ["x", None], "flops": [1e12, float("nan")]})
    df.to_parquet(tmp_path / "t.parquet")
    for table in (read_table(tmp_path / "t.parquet", ("flops",), "t"), Table.from_frame(df)):
        assert list(table["instance_type"]) == ["x", None]
        assert table["flops"][0] == 1e12 and math.isnan(table["flops"][1])
    back = Table.from_frame(df).to_frame()
    assert back["flops"].iloc[0] == 1e12 and back["instance_type"].isna().iloc[1]


def test_source_lines_before_the_header_are_comments(tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("# source: somewhere, 2025\n# more\na,b\n1,2\n")
    table = read_table(f, ("a", "b"), "test")
    assert table.names == ["a", "b"] and list(table["a"]) == ["1"]
