"""What ``attnlab train anomaly`` checks against its data before a run directory is written:
how many images the smallest digit class of a pool holds, read from scikit-learn's bundled file
without importing scikit-learn or numpy, so that the spec can call it before torch loads.
"""
from __future__ import annotations

import gzip
from collections import Counter
from importlib.util import find_spec
from pathlib import Path

__all__ = ["smallest_pool_class"]

# Of each digit class, the shares of the train and validation pools (the rest is test):
# attnlab.data.digits_sets.FRACTIONS, repeated here to stay free of numpy; the example of
# smallest_pool_class checks that both give the same pools.
_FRACTIONS = (0.6, 0.2)


def _digit_labels() -> list[str]:
    """The digit of each of the 1,797 images, from the file ``sklearn.datasets.load_digits``
    reads (64 pixels and the digit per line), found without importing scikit-learn."""
    sklearn = Path(find_spec("sklearn").origin).parent
    with gzip.open(sklearn / "datasets" / "data" / "digits.csv.gz", "rt", encoding="ascii") as f:
        return [line.rsplit(",", 1)[-1].strip() for line in f if line.strip()]


def smallest_pool_class() -> int:
    """The images of the smallest digit class in any of the train / validation / test pools
    (``attnlab.data.digits_sets.digit_pools``): a set of T images needs T - 1 of one class, so
    ``--set-size`` may be at most one more. Each class of n images gives round(0.6·n) to train,
    round(0.2·n) to validation and the rest to test.

    Examples:
        >>> smallest_pool_class()
        35
        >>> import numpy as np; from attnlab.data.digits_sets import digit_pools
        >>> min(int(np.bincount(p.labels, minlength=10).min()) for p in digit_pools().values())
        35
    """
    sizes = []
    for n in Counter(_digit_labels()).values():
        train, val = (round(share * n) for share in _FRACTIONS)
        sizes += [train, val, n - train - val]
    return min(sizes)
