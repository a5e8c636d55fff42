"""A Marian model never writes its pad token: opus-mt checkpoints ban it
(``bad_words_ids`` [[pad]] in their generation config), and attnlab's encoder–decoders never
write theirs (``attnlab.generation.translate_from_start``). With the pad token's logit raised
until it wins, greedy and beam search pick the ids Hugging Face's ``generate`` picks with that
ban (copied weights; token ids compared exactly). Before, attnlab wrote the pad token, which
the tokenizer then dropped: a translation with words missing, or an empty one."""
import pytest
import torch

from tests.interop.conftest import transformers  # noqa: F401  (skips without transformers)
from tests.interop.test_hf_marian import PAD, right_padded_source, tiny_marian
from attnlab.interop import from_hf


@pytest.fixture(scope="module")
def pair():
    pytest.importorskip("transformers")
    torch.manual_seed(5)
    hf = tiny_marian()
    with torch.no_grad():  # the pad token now wins at some steps, not at all
        hf.final_logits_bias[0, PAD] += 0.6
    return hf, from_hf(hf), right_padded_source()


# eos 3: a token the model writes, so that hypotheses end at different lengths
@pytest.mark.parametrize("num_beams, length_penalty, eos",
                         [(1, 1.0, None), (1, 1.0, 3), (3, 1.0, 3), (4, 0.6, 3), (4, 2.0, None)])
def test_pad_token_is_never_written_as_in_hugging_face(pair, num_beams, length_penalty, eos):
    hf, ours, (src, mask) = pair
    settings = dict(max_new_tokens=10, do_sample=False, num_beams=num_beams,
                    length_penalty=length_penalty)
    if eos is not None:
        settings["eos_token_id"] = eos
    if num_beams > 1:
        settings["early_stopping"] = "never"  # attnlab's search (test_marian_early_stopping)
    unbanned = hf.generate(src, attention_mask=mask, **settings)
    expected = hf.generate(src, attention_mask=mask, bad_words_ids=[[PAD]], **settings)
    assert unbanned.tolist() != expected.tolist()  # without the ban, the pad token wins
    got = ours.generate(src, 10, src_mask=mask, num_beams=num_beams,
                        length_penalty=length_penalty, eos_token_id=eos)
    assert got.tolist() == expected.tolist()
