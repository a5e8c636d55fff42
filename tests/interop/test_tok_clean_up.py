"""A checkpoint whose tokenizer_config.json says ``clean_up_tokenization_spaces: true`` (as
GPT-2 directories saved by transformers 4 do): attnlab decodes its ids to the text
``transformers``' ``decode`` gives, which (transformers 5) leaves a BPE model's text as it
is: "is n't here ." stays, not "isn't here.", a text the model never wrote."""
import json

import pytest

from attnlab.interop.hf_tokenizer import HFTokenizer

from .conftest import transformers
from .test_generate_chat import _tokenizer

TEXTS = ["the cat , it is n't here .", "hello world !", "a 's b ' c ?"]


def test_a_bpe_checkpoints_text_is_decoded_as_transformers_decodes_it(tmp_path):
    _tokenizer().save_pretrained(tmp_path)
    config = tmp_path / "tokenizer_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()),
                                  "clean_up_tokenization_spaces": True}))
    theirs = transformers.AutoTokenizer.from_pretrained(tmp_path)
    if not hasattr(theirs,
                   "clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output"):
        pytest.skip("this transformers cleans up a BPE model's text too")
    assert theirs.clean_up_tokenization_spaces
    ours = HFTokenizer.from_transformers(theirs)
    for text in TEXTS:
        ids = theirs(text)["input_ids"]
        assert ours.decode(ids) == theirs.decode(ids, skip_special_tokens=True) == text


def test_a_saved_bpe_tokenizer_that_cleans_up_is_exported_decoding_as_it_does(tmp_path):
    """A run saved before BPE checkpoints were read as transformers 5 reads them keeps its
    clean-up ("isn't here."): its export decodes as the run does, not "is n't here ."."""
    fast = HFTokenizer.from_transformers(_tokenizer()).tokenizer
    HFTokenizer(fast, {}, clean_up_tokenization_spaces=True).save(tmp_path / "tokenizer.json")
    ours = HFTokenizer.load(tmp_path / "tokenizer.json")
    ours.to_transformers().save_pretrained(tmp_path / "export")
    theirs = transformers.AutoTokenizer.from_pretrained(tmp_path / "export")
    for text in TEXTS:
        ids = ours.encode(text)
        assert theirs.decode(ids, skip_special_tokens=True) == ours.decode(ids), text
    assert ours.decode(ours.encode(TEXTS[0])) == "the cat, it isn't here."
