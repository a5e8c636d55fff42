"""Beam search's length penalty at its edges: any finite value is a ranking, not a crash."""
import math

import pytest
import torch

from attnlab.beam import beam_search

WORD, EOS = 1, 2


class Step:
    """Every step: the word with probability 0.6, EOS 0.4, the pad id (0) never."""

    def __call__(self, tokens):
        logits = torch.tensor([-math.inf, math.log(0.6), math.log(0.4)])
        return logits.expand(tokens.shape[0], 3)

    def reorder(self, index):
        pass


@pytest.mark.parametrize("length_penalty, expected", [
    (1000.0, [WORD] * 5),  # longer wins: the running beam of 5 words, out of steps
    (-1000.0, [EOS]),  # shorter wins: EOS at once
])
def test_an_extreme_length_penalty_ranks_by_length(length_penalty, expected):
    start = torch.zeros(1, 1, dtype=torch.long)
    out = beam_search(Step(), start, 5, num_beams=3, length_penalty=length_penalty,
                      eos_token_id=EOS)
    assert out[0, 1:].tolist() == expected
