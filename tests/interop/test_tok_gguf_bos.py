"""A SentencePiece GGUF file's ``tokenizer.ggml.add_bos_token`` and ``add_eos_token`` decide
what a prompt starts and ends with, as llama.cpp reads them (``llama_should_add_bos_token``:
the key's value, else a bos for a SentencePiece vocabulary and none otherwise; no eos unless
asked) and as ``transformers``' GGUF tokenizer (``AutoTokenizer.from_pretrained(dir,
gguf_file=...)``) reads them: attnlab's ids of a prompt (``generate``, ``train --init``'s
documents, ``evaluate``) are ``tok(prompt)``'s for true, false and the key left out, and
``attnlab generate`` continues the prompt as ``transformers``' greedy ``generate`` does.
"""
import pytest

from attnlab.cli import main
from attnlab.interop.checkpoint import read_tokenizer
from attnlab.interop.gguf import gguf_source, load_gguf
from attnlab.tasks.lm.continuation import prompt_ids

from .conftest import transformers
from .test_gguf_sentencepiece import TEXTS, write_sentencepiece

pytestmark = pytest.mark.slow  # writes and reads tiny models (seconds)

# (add_bos_token, add_eos_token) as the file holds them (None: left out) -> (bos?, eos?)
FLAGS = {(True, None): (True, False), (False, None): (False, False),
         (None, None): (True, False), (False, True): (False, True), (None, False): (True, False)}


@pytest.fixture(scope="module", params=list(FLAGS), ids=lambda f: f"bos={f[0]},eos={f[1]}")
def flagged(request, tmp_path_factory):
    bos, eos = request.param
    path = tmp_path_factory.mktemp("sp") / "llama2-style.gguf"
    return write_sentencepiece(path, add_bos_token=bos, add_eos_token=eos), FLAGS[bos, eos]


def test_a_prompts_ids_are_transformers_ones_and_llama_cpps_convention(flagged):
    path, (bos, eos) = flagged
    theirs = transformers.AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    ours = read_tokenizer(path, task="lm")
    for text in TEXTS:
        body = theirs(text, add_special_tokens=False)["input_ids"]
        expected = [*([1] if bos else []), *body, *([2] if eos else [])]
        assert theirs(text)["input_ids"] == expected, text
        assert prompt_ids(ours, text) == expected, text
        # a training document's first piece starts as a prompt does
        assert ours.encode_piece(text) == [*([1] if bos else []), *body], text


def test_generate_continues_as_transformers_greedy_generate(flagged, capsys):
    path, _ = flagged
    source = gguf_source(path, task="lm", model_types=None)
    hf, tok = load_gguf(source.path, source)
    x = tok("the cat sat", return_tensors="pt")["input_ids"]
    out = hf.generate(x, max_new_tokens=12, do_sample=False, eos_token_id=None, pad_token_id=0)
    assert main(["generate", str(path), "--prompt", "the cat sat", "--greedy",
                 "--max-new-tokens", "12"]) == 0
    printed = capsys.readouterr().out
    assert printed == tok.decode(out[0], skip_special_tokens=True) + "\n"
