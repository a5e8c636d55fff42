"""`attnlab train graph`'s check of --train-per-class and --val-per-class agrees with the graph:
on the karate club every split that leaves each club a test node is taken, and one more node is
refused with the club's true size; sbm groups too small for any split name --nodes and
--communities."""
import pytest

from attnlab.data.graphs import karate, split_nodes
from attnlab.errors import UsageError
from attnlab.tasks import get_task


def settings(train, val, **sbm):
    return {"graph": "sbm" if sbm else "karate", "epochs": None, "train_per_class": train,
            "val_per_class": val, **sbm}


def test_the_largest_karate_split_that_leaves_a_test_node_is_taken():
    """Both clubs have 17 members; 10 + 6 leaves each one test node, and split_nodes makes it,
    but the CLI refused it (it counted 16 members in the smaller club)."""
    labels = karate()[2]
    smallest = int(labels.bincount().min())
    train, val = 10, smallest - 11  # one node of the smaller club left to test
    assert int(split_nodes(labels, train, val)["test"].sum()) >= 2  # one per club
    get_task("graph").validate(settings(train, val))  # no UsageError
    with pytest.raises(UsageError, match=f"at most {smallest - 1} .*have {smallest} members each"):
        get_task("graph").validate(settings(train, val + 1))


@pytest.mark.parametrize("nodes, communities", [(4, 5), (8, 3)])
def test_sbm_groups_too_small_to_split_name_nodes_and_communities(nodes, communities):
    """More groups than nodes was told "must be at most -1 (... groups of 0 nodes)", a limit
    no --train-per-class can meet; the flags that make the groups are the ones to change."""
    with pytest.raises(UsageError) as error:
        get_task("graph").validate(settings(1, 1, nodes=nodes, communities=communities))
    assert str(error.value) == (f"--nodes {nodes} in --communities {communities} makes groups of "
                                f"{nodes // communities} nodes; each needs at least 3 (--nodes "
                                f"at least {3 * communities})")
    get_task("graph").validate(settings(1, 1, nodes=3 * communities, communities=communities))
