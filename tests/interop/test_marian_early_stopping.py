"""A Marian model converted by ``from_hf``: attnlab's beam search picks the ids that Hugging
Face's picks with ``early_stopping="never"`` (both search until no running beam can win; its
default, ``early_stopping=False``, stops earlier and may return a lower-scored hypothesis)."""
import pytest
import torch

from tests.interop.conftest import transformers  # noqa: F401  (skips without transformers)
from tests.interop.test_hf_marian import right_padded_source, tiny_marian
from attnlab.interop import from_hf


@pytest.fixture(scope="module")
def pair():
    pytest.importorskip("transformers")
    torch.manual_seed(5)  # three sources with three different greedy outputs
    hf = tiny_marian()
    return hf, from_hf(hf)


@pytest.mark.parametrize("num_beams, length_penalty", [(2, 1.0), (4, 0.6), (4, 2.0), (3, -1.0)])
def test_beam_search_equals_hugging_faces(pair, num_beams, length_penalty):
    hf, ours = pair
    src, mask = right_padded_source()
    greedy = hf.generate(src, attention_mask=mask, max_new_tokens=10, do_sample=False)
    eos = int(greedy[1, 3])  # a token the model does write: rows finish at different steps
    settings = dict(eos_token_id=eos, num_beams=num_beams, length_penalty=length_penalty)
    expected = hf.generate(src, attention_mask=mask, max_new_tokens=10, do_sample=False,
                           early_stopping="never", **settings)
    got = ours.generate(src, 10, src_mask=mask, **settings)
    assert (expected[:, 1:] == eos).any()  # some hypothesis ended with EOS, not at the limit
    assert got.tolist() == expected.tolist()
