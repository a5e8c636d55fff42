"""A GGUF file's end-of-generation tokens, the ids its metadata names:
``tokenizer.ggml.eos_token_id``, ``eot_token_id`` (Llama 3's ``<|eot_id|>``, Qwen's
``<|im_end|>``) and ``eom_token_id`` (Llama 3.1's ``<|eom_id|>``). ``transformers`` reads only
the eos one, so ``attnlab generate FILE.gguf --prompt`` of an instruct file wrote on past the
end of its turn to --max-new-tokens. Now a plain prompt stops there too, as ``--chat`` did,
and a run trained from the file keeps those ids.

The model is a tiny Llama set by hand so that greedy decoding is known: attention and
feed-forward outputs zero, so each step's logits are the head's rows against the normalised
embedding of the last token; every token but two points at ``<|im_end|>`` (the eot), which
points at a word token, which points at itself. The reference is ``transformers``' greedy
``generate`` stopping at the eos and eot ids (llama.cpp's end-of-generation set holds them,
and tokens it finds by their text besides, which attnlab does not read).
"""
import pytest
import torch

from attnlab.cli import main
from attnlab.interop.checkpoint import read_checkpoint
from attnlab.interop.gguf import gguf_source, load_gguf

from .gguf_files import write_llama_gguf
from .test_gguf import PROMPT, files  # noqa: F401 (a fixture)
from .test_gguf_llama import _tiny

pytestmark = pytest.mark.slow  # writes and reads a tiny model, runs generate


def _rigged(tok):
    """A Llama whose greedy ids after any prompt are <|im_end|>, then a word token repeated."""
    hf = _tiny("LlamaForCausalLM", tok)
    eot, word = tok.convert_tokens_to_ids("<|im_end|>"), tok.encode("cat")[0]
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if name.endswith(("o_proj.weight", "down_proj.weight")):
                p.zero_()  # the residual stream is the embedding alone
        hf.model.norm.weight.fill_(1.0)
        emb, head = hf.model.embed_tokens.weight, hf.lm_head.weight
        emb.zero_()
        emb[:, 0] = 1.0
        emb[[eot, word]] = torch.eye(emb.shape[1])[1]
        head.zero_()
        head[eot, 0] = head[word, 1] = 10.0
    return hf, eot, word


@pytest.fixture(scope="module")
def eot_file(files):
    hf, eot, word = _rigged(files["tok"])
    path, _ = write_llama_gguf(files["dir"] / "eot.gguf", hf, files["tok"], arch="llama",
                               added={"add_eot_token_id": eot})
    return path, eot, word


def test_a_plain_prompt_stops_at_the_files_eot_token_as_llama_cpp_does(files, eot_file, capsys):
    path, eot, word = eot_file
    tok = files["tok"]
    source = gguf_source(path, task="lm", model_types=None)
    hf, theirs = load_gguf(source.path, source)
    x = theirs(PROMPT, return_tensors="pt")["input_ids"]
    kept = hf.generate(x, max_new_tokens=5, do_sample=False, pad_token_id=0,
                       eos_token_id=[tok.eos_token_id, eot])
    assert kept[0, x.shape[1]:].tolist() == [eot]  # the rigged model: its turn ends at once
    ran_on = hf.generate(x, max_new_tokens=5, do_sample=False, pad_token_id=0, eos_token_id=None)
    assert ran_on[0, x.shape[1]:].tolist() == [eot, word, word, word, word]
    assert main(["generate", str(path), "--prompt", PROMPT, "--greedy",
                 "--max-new-tokens", "5"]) == 0
    # before, the reply went on past <|im_end|>: "catcatcatcat"
    assert capsys.readouterr().out == theirs.decode(kept[0], skip_special_tokens=True) + "\n"


def test_a_run_from_the_file_keeps_its_eos_and_eot_ids(files, eot_file):
    path, eot, _ = eot_file
    ckpt = read_checkpoint(path, task="lm")
    assert ckpt.tokenizer.checkpoint_eos_ids == [files["tok"].eos_token_id, eot]


def test_the_eos_eot_and_eom_ids_are_read_each_once(files, tmp_path):
    from attnlab.interop.gguf import gguf_eog_ids

    hf = _tiny("LlamaForCausalLM", files["tok"])
    path, _ = write_llama_gguf(tmp_path / "eom.gguf", hf, files["tok"], arch="llama",
                               added={"add_eot_token_id": 7, "add_eom_token_id": 8})
    eos = files["tok"].eos_token_id
    assert gguf_eog_ids(path) == [eos, 7, 8]
    again, _ = write_llama_gguf(tmp_path / "same.gguf", hf, files["tok"], arch="llama",
                                added={"add_eot_token_id": eos})
    assert gguf_eog_ids(again) == [eos]


def test_a_run_trained_from_the_file_stops_at_its_eot_token(files, eot_file, tmp_path, capsys):
    path, eot, word = eot_file
    text = tmp_path / "t.txt"
    text.write_text("the cat sat on the mat.\na dog ran fast!\n" * 20)
    _trained_stops_at_once(path, text, tmp_path / "run", capsys)


def test_a_path_under_home_reads_the_same_ids(files, eot_file, monkeypatch):
    from attnlab.interop.checkpoint import read_tokenizer

    path, eot, _ = eot_file
    monkeypatch.setenv("HOME", str(path.parent))
    found = read_tokenizer(f"~/{path.name}", task="lm")
    assert found.checkpoint_eos_ids == [files["tok"].eos_token_id, eot]


def test_a_run_on_a_corpus_prepared_without_the_ids_stops_at_the_eot_token(
        files, eot_file, tmp_path, capsys):
    import hashlib
    import json

    path, eot, word = eot_file
    text = tmp_path / "t.txt"
    text.write_text("the cat sat on the mat.\na dog ran fast!\n" * 20)
    corpus = tmp_path / "corpus"
    assert main(["prepare", str(text), "--tokenizer", str(path), "--out", str(corpus)]) == 0
    # the corpus as attnlab wrote it before it kept a GGUF file's eot id
    tok_file, meta_file = corpus / "tokenizer.json", corpus / "meta.json"
    saved = json.loads(tok_file.read_text())
    assert saved.pop("checkpoint_eos_ids") == [files["tok"].eos_token_id, eot]
    tok_file.write_text(json.dumps(saved))
    meta = json.loads(meta_file.read_text())
    meta["sha256"]["tokenizer.json"] = hashlib.sha256(tok_file.read_bytes()).hexdigest()
    meta_file.write_text(json.dumps(meta))
    _trained_stops_at_once(path, corpus, tmp_path / "run", capsys)


def _trained_stops_at_once(path, data, run, capsys):
    """A run trained from the rigged file on ``data`` (barely: lr 1e-9) stops at its eot."""
    assert main(["train", "lm", "--init", str(path), "--data", str(data), "--out", str(run),
                 "--max-steps", "1", "--lr", "1e-9", "--warmup", "0", "--batch-size", "2",
                 "--block-size", "8", "--threads", "1"]) == 0
    capsys.readouterr()
    assert main(["generate", str(run), "--prompt", PROMPT, "--greedy",
                 "--max-new-tokens", "5", "--threads", "1"]) == 0
    assert capsys.readouterr().out == PROMPT + "\n"  # not "the cat sat oncatcatcatcat"


def test_an_id_past_the_vocabulary_is_left_out_with_a_note(files, tmp_path, capsys):
    from attnlab.interop.gguf import gguf_eog_ids

    hf = _tiny("LlamaForCausalLM", files["tok"])
    path, _ = write_llama_gguf(tmp_path / "big.gguf", hf, files["tok"], arch="llama",
                               added={"add_eot_token_id": 1_000_000})
    assert gguf_eog_ids(path) == [files["tok"].eos_token_id]  # before: [eos, 1000000]
    assert gguf_eog_ids(path) == [files["tok"].eos_token_id]  # read again (train), said once
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"note: {path}: tokenizer.ggml.eot_token_id "
                                                   f"1000000 is past its "), err
