"""Reading a table of training rows looks up what kind of file it is once, not once per row
(each look-up is a file-system call, which cost more than reading a large file's rows), and
still names each row's line in its errors."""
from attnlab.cli import main
from attnlab.data import tables


def test_places_name_each_row_as_place_does(tmp_path):
    csv, parquet = tmp_path / "a.csv", tmp_path / "a.parquet"
    csv.write_text("")
    assert tables.places(csv, [2, 7]) == [tables.place(csv, 2), tables.place(csv, 7)]
    assert tables.places(parquet, [3]) == ["row 3"] == [tables.place(parquet, 3)]


def test_a_classify_file_is_looked_at_once_and_its_bad_row_still_named(tmp_path, monkeypatch,
                                                                       capsys):
    rows = [f"words {i},{i / 10}" for i in range(300)] + ["words last,x"]
    data = tmp_path / "r.csv"
    data.write_text("\n".join(["text,label", *rows]) + "\n")
    calls = []
    real = tables.file_format
    monkeypatch.setattr(tables, "file_format", lambda path: calls.append(path) or real(path))
    assert main(["train", "classify", "--data", str(data), "--regression", "--out",
                 str(tmp_path / "run")]) == 2
    assert not (tmp_path / "run").exists()
    assert f"--data {data} line 302: label 'x' is not a finite number" in capsys.readouterr().err
    assert 0 < len(calls) < 10  # once per reading of the file, not once per row (301 rows)
