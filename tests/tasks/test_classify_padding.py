"""A classifier's batches, padded in one call (benchmarks/pad_batches.py measures it): the ids
land where a row-by-row copy puts them, on either side, with the pad id, the attention mask
and the token types of a pretrained encoder."""
import random

import pytest
import torch

from attnlab.tasks.classify.runtime import Padding, make_batches


def _by_hand(rows, pad, side):
    T = max(map(len, rows))
    return torch.tensor([[pad] * (T - len(r)) + r if side == "left" else r + [pad] * (T - len(r))
                         for r in rows])


def _rows(n=40, seed=0):
    rng = random.Random(seed)
    return [[rng.randrange(1, 50) for _ in range(rng.randint(0, 12))] for _ in range(n - 1)] + [[7]]


def test_own_encoder_batches_hold_each_row_then_zeros():
    rows = _rows()
    for x, y in make_batches(rows, list(range(len(rows))), 8):
        assert torch.equal(x, _by_hand([rows[i] for i in y.tolist()], 0, "right"))


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("token_types", [False, True])
def test_pretrained_batches_pad_on_the_tokenizers_side(side, token_types):
    rows = _rows(seed=1)
    pairs = [(r, [i % 2 + 1 for i in range(len(r))]) for r in rows]
    padding = Padding(pad_id=99, side=side, token_types=token_types)
    for batch in make_batches(pairs, list(range(len(rows))), 8, padding=padding):
        picked = batch[-1].tolist()
        x, mask = batch[0], batch[1]
        assert torch.equal(x, _by_hand([rows[i] for i in picked], 99, side))
        assert torch.equal(mask, _by_hand([[1] * len(rows[i]) for i in picked], 0, side))
        assert len(batch) == 3 + token_types
        if token_types:
            assert torch.equal(batch[2], _by_hand([pairs[i][1] for i in picked], 0, side))
