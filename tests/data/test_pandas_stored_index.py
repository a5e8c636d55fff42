"""A new user's Parquet file of set elements, written by pandas from a filtered or shuffled
frame: pandas stores the frame's index as a column ``__index_level_0__``, which pandas itself
reads back as the index. ``--set-column`` without ``--feature-columns`` takes every other column
as a feature, and took that index too, so the model learnt from row numbers and ``predict``
wanted one more value per element than the user's features."""
import pytest

pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")

from attnlab.data.feature_sets import read_feature_sets  # noqa: E402


@pytest.mark.parametrize("kind", ["parquet", "datasets"])
def test_pandas_unnamed_index_is_not_a_feature(tmp_path, kind):
    frame = pd.DataFrame({"cloud": ["a", "b", "a", "b", "c"], "side": ["l", "r", "l", "r", "l"],
                          "x": [1.0, 2.0, 3.0, 4.0, 5.0], "y": [0.5, 0.5, 0.5, 0.5, 0.5]})
    frame = frame[frame.x > 1].sample(frac=1, random_state=0)  # index 4, 1, 3, 2
    if kind == "parquet":
        path = tmp_path / "clouds.parquet"
        frame.to_parquet(path)
    else:
        datasets = pytest.importorskip("datasets")
        path = tmp_path / "clouds"
        datasets.Dataset.from_pandas(frame).save_to_disk(path)
    sets = read_feature_sets(path, set_column="cloud", label_column="side")
    assert sets.features == ["x", "y"]
    elements = sorted(sorted(map(tuple, s.tolist())) for s, _ in sets)
    assert elements == [[(2.0, 0.5), (4.0, 0.5)], [(3.0, 0.5)], [(5.0, 0.5)]]


def test_a_column_named_as_pandas_index_is_read_when_asked_for(tmp_path):
    frame = pd.DataFrame({"cloud": ["a", "b"], "side": ["l", "r"], "x": [1.0, 2.0]},
                         index=[5, 2])  # not 0..n-1: stored as a column
    path = tmp_path / "c.parquet"
    frame.to_parquet(path)
    sets = read_feature_sets(path, set_column="cloud", label_column="side",
                             feature_columns=["x", "__index_level_0__"])
    assert sets.features == ["x", "__index_level_0__"]
    assert [s.tolist() for s, _ in sets] == [[[1.0, 5.0]], [[2.0, 2.0]]]
