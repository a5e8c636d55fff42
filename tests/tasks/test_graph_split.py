"""`attnlab train graph`'s check of --train-per-class and --val-per-class on the karate club
agrees with the graph: every split that leaves each club a test node is taken, and one more node
is refused with the club's true size."""
import pytest

from attnlab.data.graphs import karate, split_nodes
from attnlab.errors import UsageError
from attnlab.tasks import get_task


def settings(train, val):
    return {"graph": "karate", "epochs": None, "train_per_class": train, "val_per_class": val}


def test_the_largest_karate_split_that_leaves_a_test_node_is_taken():
    """Both clubs have 17 members; 10 + 6 leaves each one test node, and split_nodes makes it,
    but the CLI refused it (it counted 16 members in the smaller club)."""
    labels = karate()[2]
    smallest = int(labels.bincount().min())
    train, val = 10, smallest - 11  # one node of the smaller club left to test
    assert int(split_nodes(labels, train, val)["test"].sum()) >= 2  # one per club
    get_task("graph").validate(settings(train, val))  # no UsageError
    with pytest.raises(UsageError, match=f"at most {smallest - 1} .*has {smallest} members"):
        get_task("graph").validate(settings(train, val + 1))
