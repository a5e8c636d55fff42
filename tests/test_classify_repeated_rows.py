"""A --data file that repeats a row puts copies of it on both sides of the split classify draws
from it: the test (and validation) scores then count texts the model trained on. A --test or
--val file sharing texts with training was named; the rows drawn from --data were not, while
translate names them. Now both are, once, when the run starts; a file without repeats says
nothing."""
from attnlab.tasks.classify import TASKS
from attnlab.tasks.classify.data import load_splits

TASK = TASKS["classify"]

WORDS = ["good", "bad", "fine", "awful", "great", "poor", "nice", "dull", "bright", "grim"]


def _cfg(path):
    return TASK.config(data=str(path), test=None, val=None, text_column="text",
                       label_column="label")


def _write(path, rows):
    path.write_text("text,label\n" + "".join(f"{t},{y}\n" for t, y in rows))
    return path


def _distinct(n):
    return [(f"{WORDS[i % 10]} film number {i}", "pos" if i % 2 else "neg") for i in range(n)]


def test_rows_repeated_in_data_are_named_when_drawn_on_both_sides(tmp_path):
    data = _write(tmp_path / "twice.csv", _distinct(100) * 2)  # every row twice
    notes: list[str] = []
    splits = load_splits(_cfg(data), notes=notes)
    trained = {x for x, _ in splits["train"]}
    for key in ("test", "val"):
        shared = sum(x in trained for x, _ in splits[key])
        assert shared > 0  # the file's copies landed on both sides
        note = [n for n in notes if f"the {key} rows of --data {data}:" in n]
        assert len(note) == 1
        assert f": {shared} of its {len(splits[key])} rows have an input that a training row " \
               f"has too (first: line " in note[0]


def test_a_file_without_repeats_says_nothing(tmp_path):
    notes: list[str] = []
    load_splits(_cfg(_write(tmp_path / "once.csv", _distinct(200))), notes=notes)
    assert notes == []
