"""attnlab.tasks.jets.data: files in the Top Quark Tagging Reference Dataset's layout, written here by
pandas exactly as the reference files are (with their truth and ttv columns), in both of pandas'
HDF formats; read whole, by range and in chunks; errors that name the file, column and row."""
import tracemalloc

import numpy as np
import pytest

pd = pytest.importorskip("pandas")
pytest.importorskip("tables")

from attnlab.tasks.jets.data import (LABEL_COLUMN, MAX_CONSTITUENTS, check_jet_file,  # noqa: E402
                               count_jets, iter_jets, jet_columns, read_jets, read_labels,
                               read_settings, write_jets)
from attnlab.errors import UsageError  # noqa: E402

FORMATS = ["fixed", "table"]
TRUTH = ["truthE", "truthPX", "truthPY", "truthPZ", "ttv"]


def reference_jets(n_jets: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(p4 (n, 200, 4) float64, labels): random massless constituents, pT-ordered, zero-padded."""
    rng = np.random.default_rng(seed)
    p4 = np.zeros((n_jets, MAX_CONSTITUENTS, 4))
    for j, n in enumerate(rng.integers(1, 120, n_jets)):
        pt = np.sort(rng.exponential(20.0, n))[::-1]
        eta, phi = rng.normal(0, 0.3, n), rng.uniform(-np.pi, np.pi, n)
        p4[j, :n] = np.c_[pt * np.cosh(eta), pt * np.cos(phi), pt * np.sin(phi), pt * np.sinh(eta)]
    return p4, np.arange(n_jets) % 2


def reference_frame(p4: np.ndarray, labels: np.ndarray) -> "pd.DataFrame":
    """The reference files' columns in their order: E_0..PZ_199, truth*, ttv, is_signal_new."""
    frame = pd.DataFrame(p4.reshape(len(p4), -1), columns=jet_columns())
    for name in TRUTH:
        frame[name] = 1.0 if name != "ttv" else 0
    frame[LABEL_COLUMN] = labels
    return frame


def write_reference(path, p4, labels, fmt: str, frame=None):
    (reference_frame(p4, labels) if frame is None else frame).to_hdf(
        path, key="table", mode="w", format=fmt)
    return path


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS)
def test_chunks_and_ranges_equal_the_whole_read(tmp_path, fmt):
    p4, labels = reference_jets(23)
    path = write_reference(tmp_path / f"{fmt}.h5", p4, labels, fmt)
    whole, whole_labels = read_jets(path)
    assert whole.dtype == np.float32 and whole.shape == (23, 200, 4)
    np.testing.assert_array_equal(whole, p4.astype(np.float32))
    assert whole_labels.dtype == np.int64 and whole_labels.tolist() == labels.tolist()
    for size in (1, 5, 23, 100):
        chunks = list(iter_jets(path, size))
        assert [len(c[0]) for c in chunks][:-1] == [size] * (len(chunks) - 1)
        np.testing.assert_array_equal(np.concatenate([c[0] for c in chunks]), whole)
        np.testing.assert_array_equal(np.concatenate([c[1] for c in chunks]), whole_labels)
    part, part_labels = read_jets(path, 4, 9, max_constituents=30)
    np.testing.assert_array_equal(part, whole[4:9, :30])
    np.testing.assert_array_equal(part_labels, whole_labels[4:9])
    np.testing.assert_array_equal(read_labels(path, 3, 20), whole_labels[3:20])
    assert count_jets(path) == check_jet_file(path) == 23
    assert read_settings(path) is None  # a reference file has no generator settings
    assert whole.flags.writeable  # torch.from_numpy must not warn


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS)
def test_iter_jets_holds_one_chunk_not_the_file(tmp_path, fmt):
    p4, labels = reference_jets(3000, seed=1)
    path = write_reference(tmp_path / f"{fmt}.h5", p4, labels, fmt)
    del p4
    chunk, file_bytes = 100, 3000 * (4 * MAX_CONSTITUENTS + len(TRUTH) + 1) * 8  # float64 rows
    tracemalloc.start()
    try:
        total = sum(float(c[0].sum()) for c in iter_jets(path, chunk))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert total == pytest.approx(float(read_jets(path)[0].sum(dtype=np.float64)), rel=1e-6)
    # a chunk is 100 · 806 · 8 B = 0.64 MB as pandas reads it; the file 19 MB
    assert peak < 8 * chunk * file_bytes / 3000, f"peak {peak / 1e6:.1f} MB for 0.6 MB chunks"
    assert peak < file_bytes / 4


def test_write_jets_holds_one_chunk_beside_the_jets(tmp_path, monkeypatch):
    """Writing once held four more copies of the jets (13 kB a jet beside their 3 kB), so
    ``data jets`` could make more jets than it could write; now a chunk at a time."""
    from attnlab.tasks.jets import data

    monkeypatch.setattr(data, "SCAN_CHUNK", 100)
    p4, labels = reference_jets(3000, seed=3)
    p4 = p4.astype(np.float32)  # 9.6 MB; a chunk of 100 jets 0.3 MB
    tracemalloc.start()
    try:
        write_jets(tmp_path / "j.h5", p4, labels, settings={"seed": 3})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < p4.nbytes / 4, f"peak {peak / 1e6:.1f} MB beside {p4.nbytes / 1e6:.1f} MB"
    read, read_labels_ = read_jets(tmp_path / "j.h5")
    np.testing.assert_array_equal(read, p4)
    np.testing.assert_array_equal(read_labels_, labels)
    assert read_settings(tmp_path / "j.h5") == {"seed": 3}
    assert pd.read_hdf(tmp_path / "j.h5", "table", start=2998).index.tolist() == [2998, 2999]


@pytest.mark.slow
def test_the_same_jets_make_the_same_bytes(tmp_path):
    """``data jets`` with the same --seed made files that differed in the time HDF5 stamps on
    the table, so their SHA-256 differed, and a run that recorded one took the other for a
    changed file. A second apart (the stamp counts seconds), the bytes are the same."""
    import time

    p4, labels = reference_jets(30, seed=4)
    write_jets(tmp_path / "a.h5", p4, labels, settings={"seed": 4})
    time.sleep(1.1)
    write_jets(tmp_path / "b.h5", p4, labels, settings={"seed": 4})
    assert (tmp_path / "a.h5").read_bytes() == (tmp_path / "b.h5").read_bytes()


def test_write_jets_leaves_a_file_named_like_its_temporary_alone(tmp_path):
    """The file was written as NAME.partial and renamed: a user's own jets.h5.partial was
    overwritten, then deleted. Now it stays, and nothing else is left beside jets.h5."""
    mine = tmp_path / "jets.h5.partial"
    mine.write_text("my notes\n")
    p4, labels = reference_jets(4, seed=5)
    write_jets(tmp_path / "jets.h5", p4, labels)
    assert mine.read_text() == "my notes\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jets.h5", "jets.h5.partial"]
    assert count_jets(tmp_path / "jets.h5") == 4


def test_write_jets_round_trip_in_the_reference_layout(tmp_path):
    p4, labels = reference_jets(7, seed=2)
    settings = {"generator": "attnlab data jets", "seed": 3, "recipe": {"common": ["a", "b"]}}
    path = tmp_path / "gen.h5"
    write_jets(path, p4[:, :60], labels, settings=settings)  # fewer columns: padded to 200
    with pd.HDFStore(path, "r") as store:
        assert "/table" in store.keys() and store.get_storer("table").is_table
        columns = list(store.select("table", start=0, stop=0).columns)
    assert columns == [*jet_columns(), LABEL_COLUMN]
    back, back_labels = read_jets(path)
    expected = np.zeros_like(p4, dtype=np.float32)
    expected[:, :60] = p4[:, :60]
    np.testing.assert_array_equal(back, expected)
    assert back_labels.tolist() == labels.tolist()
    assert read_settings(path) == settings
    assert not (tmp_path / "gen.h5.partial").exists()


@pytest.mark.parametrize("p4, labels, settings, message", [
    (np.zeros((2, 3)), [0, 1], None, "shape"),
    (np.zeros((2, 201, 4)), [0, 1], None, "shape"),
    (np.zeros((0, 3, 4)), [], None, "N >= 1"),
    (np.zeros((2, 3, 4)), [0, 2], None, "0 or 1"),
    (np.full((2, 3, 4), np.nan), [0, 1], None, "NaN"),
    (np.zeros((2, 3, 4)), [0, 1], {"f": object()}, "JSON"),
])
def test_write_jets_rejects_bad_input(tmp_path, p4, labels, settings, message):
    with pytest.raises(ValueError, match=message):
        write_jets(tmp_path / "x.h5", p4, labels, settings)
    assert not (tmp_path / "x.h5").exists()


def _frame_with(change):
    p4, labels = reference_jets(12, seed=3)
    return change(reference_frame(p4, labels))


def _set(column, row, value):
    def change(frame):
        frame.loc[row, column] = value
        return frame
    return change


BAD_FILES = {
    "missing momenta": (lambda f: f.drop(columns=["PX_3", "E_150"]), "missing columns PX_3, E_150"),
    "missing label": (lambda f: f.drop(columns=[LABEL_COLUMN]), f"missing columns {LABEL_COLUMN}"),
    "NaN": (_set("PY_7", 5, np.nan), "column PY_7 row 5 is NaN"),
    "inf": (_set("E_0", 11, np.inf), "column E_0 row 11 is inf"),
    "NaN label": (_set(LABEL_COLUMN, 2, np.nan), f"column {LABEL_COLUMN} row 2 is nan"),
    "label 2": (_set(LABEL_COLUMN, 4, 2), f"column {LABEL_COLUMN} row 4 is 2"),
    # a column of objects (text beside numbers) once ended in a ValueError traceback, exit 1
    "text": (lambda f: _set("PX_3", 5, "abc")(f.astype({"PX_3": object})),
             "column PX_3 row 5 is 'abc' (expected a number)"),
    "no jets": (lambda f: f.iloc[:0], "no jets"),
    "one class": (_set(LABEL_COLUMN, slice(None), 1),
                  f"only one class ({LABEL_COLUMN} = 1 for all 12 jets)"),
}


@pytest.mark.filterwarnings("ignore::pandas.errors.PerformanceWarning")  # writing "text"
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("case", list(BAD_FILES))
def test_bad_files_are_usage_errors_naming_file_column_and_row(tmp_path, fmt, case):
    change, message = BAD_FILES[case]
    frame = _frame_with(change)
    if case in ("no jets", "text") and fmt == "table":
        fmt = "fixed"  # pandas writes nothing for an empty "table" frame, nor text in numbers
    path = write_reference(tmp_path / "bad.h5", None, None, fmt, frame=frame)
    with pytest.raises(UsageError) as caught:
        check_jet_file(path, what="--test")
    text = str(caught.value)
    assert text.startswith(f"--test {path}: ") and message in text and "\n" not in text


def test_files_that_are_not_jet_files(tmp_path):
    cases = {tmp_path / "absent.h5": "not found", tmp_path: "is a directory",
             tmp_path / "notes.txt": "not an HDF5 file", tmp_path / "other.h5": "no key 'table'"}
    (tmp_path / "notes.txt").write_text("E_0,PX_0\n1,2\n")
    pd.DataFrame({"a": [1.0]}).to_hdf(tmp_path / "other.h5", key="jets", mode="w")
    for path, message in cases.items():
        for read in (lambda p: check_jet_file(p, "--val"), count_jets, read_jets,
                     lambda p: iter_jets(p, 10)):
            with pytest.raises(UsageError, match=message) as caught:
                read(path)
            assert str(path) in str(caught.value)


def test_a_range_past_the_end_names_it(tmp_path):
    p4, labels = reference_jets(5)
    path = write_reference(tmp_path / "j.h5", p4, labels, "table")
    with pytest.raises(UsageError, match=r"jets 3\.\.9 are out of range \(the file has 5 jets\)"):
        read_jets(path, 3, 9)
    with pytest.raises(ValueError, match="chunk_size"):
        iter_jets(path, 0)


def assert_every_reader_refuses(path, says: str, what: str) -> None:
    """read_jets, iter_jets and check_jet_file (as flag ``what``) all refuse ``path`` with the
    one line ``says`` (the flag first where it has one)."""
    for read in (lambda: read_jets(path), lambda: list(iter_jets(path, 2)),
                 lambda: check_jet_file(path, what=what)):
        with pytest.raises(UsageError) as err:
            read()
        assert str(err.value).endswith(says), err.value
    assert str(err.value) == f"{what} {says}"


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_negative_energy_is_refused_not_taken_as_padding(tmp_path, fmt):
    """The mask is E > 0, so E < 0 would silently become padding: every reader refuses
    it, naming the column, row and value; a zero energy elsewhere (padding) is still read."""
    p4, labels = reference_jets(6)
    p4[4, 2, 0] = -3.25
    path = write_reference(tmp_path / f"{fmt}.h5", p4, labels, fmt)
    says = f"{path}: column E_2 row 4 is -3.25 (an energy must be >= 0; a zero row is padding)"
    assert_every_reader_refuses(path, says, "--data")
    assert read_jets(path, 0, 4)[0].shape == (4, 200, 4)  # the rows before it are fine


def test_a_zero_energy_with_momentum_is_refused_not_taken_as_padding(tmp_path):
    """E = 0 marks padding, so a constituent with E = 0 but a momentum would be dropped
    silently, as a negative energy would: refused."""
    p4, labels = reference_jets(4)
    p4[2, 1] = [0.0, 0.0, -7.5, 1.0]
    path = write_reference(tmp_path / "zero.h5", p4, labels, "table")
    with pytest.raises(UsageError) as err:
        read_jets(path)
    assert str(err.value) == (f"{path}: column E_1 row 2 is 0 but PY_1 is -7.5 (a zero energy "
                              f"marks padding, whose row is all zeros)")


def test_an_energy_below_the_momentum_is_refused(tmp_path):
    """E < |p| is no particle (m² < 0): the jet mass came out as 0 (clamped) and the features
    were read from it without a word. Refused, naming the column and row; a massless
    constituent whose E and p float32 rounds a little apart (reference_jets) is still read."""
    p4, labels = reference_jets(5)
    p4[3, 4, 0] = 0.5 * np.linalg.norm(p4[3, 4, 1:])
    path = write_reference(tmp_path / "spacelike.h5", p4, labels, "table")
    with pytest.raises(UsageError) as err:
        check_jet_file(path, what="--data")
    text = str(err.value)
    energy = float(np.float32(p4[3, 4, 0]))  # as the file is read
    assert text.startswith(f"--data {path}: column E_4 row 3 is {energy:g}, ") and \
        "below the constituent's momentum |p| = " in text and "\n" not in text
    assert read_jets(path, 0, 3)[0].shape == (3, 200, 4)  # the rows before it are fine


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_jet_without_constituents_is_refused(tmp_path, fmt):
    """An all-zero row is all padding: training and evaluate once scored it like a jet (predict
    already refused it). Every reader refuses it; its label is still read alone."""
    p4, labels = reference_jets(6)
    p4[4] = 0.0
    path = write_reference(tmp_path / f"{fmt}.h5", p4, labels, fmt)
    says = f"{path}: row 4 has no constituents (every energy E_0..E_199 is 0)"
    assert_every_reader_refuses(path, says, "--test")
    assert read_labels(path).tolist() == labels.tolist()


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_jet_not_ordered_by_pt_is_refused_where_the_read_drops_a_harder_one(tmp_path, fmt):
    """--max-constituents N keeps the first N constituents, the hardest only in a pT-ordered
    file: a hand-made file in another order was read as another jet (a model permutation
    invariant gave another score when the constituents were shuffled). Refused where a dropped
    constituent is harder than a kept one; read whole, or in pT order, it is accepted."""
    p4, labels = reference_jets(6)
    lengths = (p4[..., 0] > 0).sum(1)
    row = int(np.flatnonzero(lengths > 45)[0])
    ordered = write_reference(tmp_path / "ordered.h5", p4, labels, fmt)
    assert read_jets(ordered, max_constituents=30)[0].shape == (6, 30, 4)
    p4[row, [3, 45]] = p4[row, [45, 3]]  # the 4th hardest after the 30 read, a soft one in
    path = write_reference(tmp_path / f"{fmt}.h5", p4, labels, fmt)
    pt = np.hypot(*p4[row, :, 1:3].astype(np.float32).T)  # as the file is read
    says = (f"{path}: row {row} is not ordered by pT: constituent 45 (pT {pt[45]:g}) is harder "
            f"than constituent 3 (pT {pt[3]:g}), yet only the first 30 are read "
            f"(--max-constituents 30); order each jet's constituents by decreasing pT")
    for read in (lambda: read_jets(path, max_constituents=30),
                 lambda: list(iter_jets(path, 2, max_constituents=30)),
                 lambda: check_jet_file(path, what="--data", max_constituents=30)):
        with pytest.raises(UsageError) as err:
            read()
        assert str(err.value).endswith(says), err.value
    assert str(err.value) == f"--data {says}"
    np.testing.assert_array_equal(read_jets(path)[0], p4.astype(np.float32))  # nothing dropped
    assert read_labels(path).tolist() == labels.tolist()


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_constituent_after_padding_is_refused_where_the_read_drops_it(tmp_path, fmt):
    """A jet with zero rows (padding) among its constituents, and constituents after them
    past --max-constituents: the order check counted padding as no constituent to compare,
    so such a jet was read with fewer constituents than it has and than N allows (here 10
    of its 20 with N = 30), silently. Refused, naming the row, the constituent and the gap;
    read whole, or with the padding last, it is accepted."""
    p4, labels = reference_jets(4)
    pt = np.linspace(100.0, 5.0, 40)
    p4[:, :40], p4[:, 40:] = np.c_[pt, pt, 0 * pt, 0 * pt], 0.0
    packed = write_reference(tmp_path / "packed.h5", p4, labels, fmt)
    p4[1, 10:30] = 0.0  # 20 constituents left, 10 of them after the first 30
    path = write_reference(tmp_path / f"{fmt}.h5", p4, labels, fmt)
    says = (f"{path}: row 1 has constituent 30 (pT {np.float32(pt[30]):g}) after a padding row "
            f"(constituent 10 is all zeros), yet only the first 30 are read "
            f"(--max-constituents 30); put each jet's constituents first, by decreasing pT, "
            f"and the padding after")
    for read in (lambda: read_jets(path, max_constituents=30),
                 lambda: check_jet_file(path, what="--data", max_constituents=30)):
        with pytest.raises(UsageError) as err:
            read()
        assert str(err.value).endswith(says), err.value
    assert (read_jets(path, max_constituents=40)[0][1, :, 0] > 0).sum() == 20
    np.testing.assert_array_equal(read_jets(packed, max_constituents=30)[0][1],
                                  np.c_[pt, pt, 0 * pt, 0 * pt][:30].astype(np.float32))
    p4[1, 10:20], p4[1, 20:40] = p4[1, 30:40].copy(), 0.0  # the same 20, padding last
    moved = write_reference(tmp_path / "moved.h5", p4, labels, fmt)
    assert (read_jets(moved, max_constituents=30)[0][1, :, 0] > 0).sum() == 20


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_nan_in_a_dropped_column_hides_no_harder_constituent(tmp_path, fmt):
    """A NaN in a column past --max-constituents is not read, so it is not refused; but it made
    its row's largest dropped pT NaN, and the order check passed the row whatever else it
    dropped: here constituent 45, harder than a kept one, was dropped silently."""
    p4, labels = reference_jets(6)
    row = int(np.flatnonzero((p4[..., 0] > 0).sum(1) > 45)[0])
    p4[row, [3, 45]] = p4[row, [45, 3]]
    p4[row, 40, 1] = np.nan
    path = write_reference(tmp_path / f"{fmt}.h5", p4, labels, fmt)
    with pytest.raises(UsageError, match=rf"^--data {path}: row {row} is not ordered by pT: "
                       rf"constituent 45 \(pT [0-9.]+\) is harder than constituent 3 "):
        check_jet_file(path, what="--data", max_constituents=30)


def test_constituents_past_the_200th_are_checked_not_dropped_unseen(tmp_path):
    """A file of one's own may hold more than the reference's 200 constituents (E_200, ...).
    Only the first 200 are read; the pT-order check looked no further than PZ_199, so a jet
    whose hardest constituent stood at column 220 was read without it, silently: another jet.
    Refused now, naming it; a pT-ordered file of 250 is read to its 200 hardest."""
    pt = np.linspace(300.0, 1.0, 250)
    wide = np.tile(np.c_[pt, pt, 0 * pt, 0 * pt], (4, 1, 1))  # (4, 250, 4), pT-ordered
    frame = pd.DataFrame(wide.reshape(4, -1), columns=[
        f"{c}_{i}" for i in range(250) for c in ("E", "PX", "PY", "PZ")])
    frame[LABEL_COLUMN] = [0, 1, 0, 1]
    ordered = write_reference(tmp_path / "ordered.h5", None, None, "fixed", frame=frame)
    np.testing.assert_array_equal(read_jets(ordered)[0], wide[:, :200].astype(np.float32))
    frame.loc[2, ["E_220", "PX_220", "PY_220", "PZ_220"]] = [500.0, 500.0, 0.0, 0.0]
    path = write_reference(tmp_path / "wide.h5", None, None, "fixed", frame=frame)
    with pytest.raises(UsageError, match=rf"^--data {path}: row 2 is not ordered by pT: "
                       rf"constituent 220 \(pT 500\) is harder than constituent 199 "):
        check_jet_file(path, what="--data")


@pytest.mark.filterwarnings("ignore::pandas.errors.PerformanceWarning")  # writing text
def test_text_in_a_column_the_read_drops_is_one_line_too(tmp_path):
    """The pT-order check reads the columns past --max-constituents: text there was a
    ValueError traceback (exit 1), where text in a kept column is one line."""
    frame = _frame_with(lambda f: _set("PX_45", 5, "abc")(f.astype({"PX_45": object})))
    path = write_reference(tmp_path / "bad.h5", None, None, "fixed", frame=frame)
    with pytest.raises(UsageError, match=r"column PX_45 row 5 is 'abc' \(expected a number\)"):
        check_jet_file(path, what="--test", max_constituents=30)
