"""A Llama directory whose tokenizer is Llama 2's kind (SentencePiece-style pieces that carry their
word's leading space, and a bos token put before every text), given to ``train lm --init``,
``generate`` and ``export``.

What a user would see if these broke: a run's continuation glued to its prompt ("the catsat"),
a run that reads a prompt without the bos token its checkpoint and ``transformers`` put
there (so its export continues a prompt otherwise than ``attnlab generate RUN`` does), a
Llama fine-tune trained at lm's dropout 0.1 where the checkpoint has none, and, with the byte
pieces Llama 2 spells a character it has no piece for in, a character after a prompt ending in
one printed "����" or a --stop string begun in such a prompt never found.

Offline: the family tests' tiny random LlamaForCausalLM (weights drawn with std 0.2, so greedy
ids are not decided by rounding) beside a tokenizer trained here.
"""
import json
from types import SimpleNamespace

import pytest
from tokenizers import (Tokenizer, decoders, models, normalizers, pre_tokenizers, processors,
                        trainers)

from .conftest import transformers  # (skips without the hf extra)
from .test_llama_family import _tiny

import attnlab  # noqa: E402
from attnlab.cli import main  # noqa: E402
from attnlab.commands.train import configure  # noqa: E402

CORPUS = ["the cat sat on the mat.", "a dog ran fast!", "hello world, hello there"] * 20
TEXT = " ".join(CORPUS * 5)  # 7 kB: a validation tenth of over 17 tokens
N = 12  # new tokens


def _llama2_tokenizer():
    """Llama 2's layout (its tokenizer.json as transformers converts it): a "▁" before the text
    and for every space, word pieces that carry it (learnt here word by word, as SentencePiece
    learns them), decoding that drops the space starting a text, and "<s>" before every text."""
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="always")
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(
        vocab_size=120, special_tokens=["<unk>", "<s>", "</s>"], show_progress=False))
    tok.pre_tokenizer = None
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"),
                                           normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)])
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>",
                                                eos_token="</s>", unk_token="<unk>")


def save_llama2(d):
    """The checkpoint, with a generation_config.json that samples, as Llama 2 Chat's does."""
    tok = _llama2_tokenizer()
    model = _tiny("llama", vocab_size=len(tok), max_position_embeddings=64, bos_token_id=1,
                  eos_token_id=2)
    model.generation_config.update(do_sample=True, temperature=0.6, top_p=0.9)
    model.save_pretrained(d)
    tok.save_pretrained(d)
    return d


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """The checkpoint, a text file, a run of one step from it and the run's export."""
    root = tmp_path_factory.mktemp("llama2_style")
    d = save_llama2(root / "llama2")
    text = root / "text.txt"
    text.write_text(TEXT, encoding="utf-8")
    return {"dir": d, "text": text, "root": root}


@pytest.fixture(scope="module")
def run(made):
    out = made["root"] / "run"
    assert main(["train", "lm", "--init", str(made["dir"]), "--data", str(made["text"]),
                 "--out", str(out), "--max-steps", "2", "--warmup", "1", "--lr", "1e-2",
                 "--block-size", "16", "--batch-size", "2", "--val-batches", "1",
                 "--precision", "32", "--threads", "1"]) == 0
    assert main(["export", str(out), "--hf", str(made["root"] / "exported")]) == 0
    return out


def _transformers_greedy(directory, prompt, n=N):
    """transformers' greedy continuation of ``prompt`` (tok(prompt): its bos first), the whole
    output decoded as transformers decodes it."""
    tok = transformers.AutoTokenizer.from_pretrained(directory)
    model = transformers.AutoModelForCausalLM.from_pretrained(directory).eval()
    enc = tok(prompt, return_tensors="pt")
    out = model.generate(**enc, max_new_tokens=n, do_sample=False, pad_token_id=tok.eos_token_id)
    return tok.decode(out[0], skip_special_tokens=True)


@pytest.mark.slow
def test_a_run_continues_after_the_space_its_first_word_carries(run):
    """The continuation of a run from a SentencePiece checkpoint is printed after the prompt
    with the space its first piece carries ("the cat sat"), as ``generate DIR`` prints it,
    not decoded alone and glued to the prompt ("the catsat")."""
    from attnlab.tasks.lm.continuation import AfterPrompt, prompt_ids

    tokenizer = attnlab.load(run)[1]
    prompt, new = tokenizer.encode_split("the cat sat", len("the cat"))
    assert prompt == prompt_ids(tokenizer, "the cat")  # (bos first)
    assert tokenizer.decode(new) == "sat"  # decoded alone: glued to the prompt
    assert AfterPrompt(tokenizer, prompt).decode(new) == " sat"
    # that generate prints its own continuation so: the next test, against transformers'
    # decoding of the whole output


@pytest.mark.slow
def test_a_run_reads_a_prompt_as_its_checkpoint_and_its_export_do(made, run, capsys):
    """``generate RUN``, ``predict RUN`` and transformers on ``export RUN``'s directory read
    the prompt the same way (bos first) and so continue it with the same greedy text."""
    expected = _transformers_greedy(made["root"] / "exported", "the cat")
    capsys.readouterr()
    assert main(["generate", str(run), "--prompt", "the cat", "--greedy",
                 "--max-new-tokens", str(N), "--threads", "1"]) == 0
    assert capsys.readouterr().out == expected + "\n"
    assert main(["predict", str(run), "--input", "the cat", "--max-new-tokens", str(N)]) == 0
    # predict prints the continuation alone: decoded alone, its first piece's space is dropped
    continued = expected[len("the cat"):].removeprefix(" ").replace("\n", " ")
    assert capsys.readouterr().out.splitlines()[-1] == continued


@pytest.mark.slow
def test_the_export_states_the_runs_bos_and_eos_and_its_own_sampling(made, run):
    """A run keeps --init DIR's weights, not its sampling defaults (docs/cli.md): its export's
    generation_config.json names the ids the run reads and stops at, and samples as
    ``attnlab generate RUN`` does (temperature 1, no top-k or top-p), so that transformers
    does not sample the fine-tune as DIR's authors sampled DIR (temperature 0.6)."""
    assert json.loads((made["dir"] / "generation_config.json").read_text())["temperature"] == 0.6
    exported = made["root"] / "exported"
    config = transformers.GenerationConfig.from_pretrained(exported)
    assert config.do_sample is True and config.top_k == 0
    assert config.temperature in (None, 1.0) and config.top_p in (None, 1.0)
    tokenizer = attnlab.load(run)[1]
    assert (config.bos_token_id, config.eos_token_id) == (tokenizer.sos_id, tokenizer.eos_id)
    assert (config.bos_token_id, config.eos_token_id) == (1, 2)  # the checkpoint's <s>, </s>


def test_the_checkpoint_itself_is_continued_as_transformers_continues_it(made, capsys):
    """The reference the run is held to: ``generate DIR`` on the checkpoint."""
    assert main(["generate", str(made["dir"]), "--prompt", "the cat", "--greedy",
                 "--max-new-tokens", str(N), "--threads", "1"]) == 0
    assert capsys.readouterr().out == _transformers_greedy(made["dir"], "the cat") + "\n"


def _configure(made, **given):
    return configure("lm", {"init": str(made["dir"]), "data": str(made["text"]),
                            "out": str(made["root"] / "unmade"), "block_size": 16, **given})[0]


def test_a_llama_fine_tune_keeps_the_checkpoints_dropout_and_says_so(made, capsys):
    """Llama has no dropout on its residual stream and config.json's attention_dropout 0.0:
    the run trains so (lm's own default is 0.1 on both), as a GPT-2 fine-tune keeps
    resid_pdrop (#37); the note names where each value comes from."""
    cfg = _configure(made)
    assert (cfg.dropout, cfg.attention_dropout) == (0.0, 0.0)
    assert (cfg.record()["dropout"], cfg.record()["attention_dropout"]) == (0.0, 0.0)
    notes = [line for line in capsys.readouterr().err.splitlines() if "dropout" in line]
    assert len(notes) == 2 and "config.json's attention_dropout" in notes[1]
    assert not (made["root"] / "unmade").exists()


def test_a_dropout_given_wins_over_the_llama_checkpoints(made, capsys):
    cfg = _configure(made, dropout=0.05, attention_dropout=0.02)
    assert (cfg.dropout, cfg.attention_dropout) == (0.05, 0.02)
    assert "dropout" not in capsys.readouterr().err


@pytest.mark.parametrize("prompt, response", [("hello ", "world"), ("a dog", " ran fast!"),
                                              ("the cat", "sat")])
def test_a_plain_rows_text_is_its_prompt_and_response_as_written(made, tmp_path, prompt,
                                                                   response):
    """A base model's prompt/response row trains on prompt + response as the row has them
    (``tok(prompt + response)``: bos, one text, then eos), the labels on the response and the
    eos; not on a response encoded alone, which a SentencePiece tokenizer starts with a space
    the row does not have ("hello  world", "the cat sat")."""
    from attnlab.data.chat_rows import IGNORE, read_rows
    from attnlab.interop.checkpoint import read_tokenizer
    from attnlab.tasks.lm.instruct import encode_rows

    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"prompt": prompt, "response": response}) + "\n")
    tok = read_tokenizer(made["dir"], task="lm")
    cfg = SimpleNamespace(instruction="plain", init=str(made["dir"]), out=None, block_size=64)
    [(ids, labels)] = encode_rows(cfg, tok, read_rows(rows), [0])
    theirs = transformers.AutoTokenizer.from_pretrained(made["dir"])
    assert ids == theirs(prompt + response)["input_ids"] + [tok.eos_id]
    assert tok.decode(ids) == prompt + response
    first = next(i for i, label in enumerate(labels) if label != IGNORE)
    assert labels[first:] == ids[first:] and set(labels[:first]) == {IGNORE}
    assert tok.decode(ids[:first]) == prompt.rstrip()  # the response's first piece holds its space


def test_a_plain_rows_prompt_stays_as_generate_reads_it_where_the_text_allows(tmp_path):
    """A byte-level BPE (GPT-2's, Qwen's) encodes prompt and response apart to the same text:
    the prompt's tokens stay those generate and predict give the model ("reverse: dog" then
    "god"), not those of the text read whole (" doggod" may merge across the two)."""
    from attnlab.data.chat_rows import IGNORE, read_rows
    from attnlab.interop.hf_tokenizer import HFTokenizer
    from attnlab.tasks.lm.instruct import encode_rows

    from .test_checkpoint import _byte_level_bpe

    tok = HFTokenizer.from_transformers(transformers.PreTrainedTokenizerFast(
        tokenizer_object=_byte_level_bpe(["<|endoftext|>"]), eos_token="<|endoftext|>"))
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"prompt": "the cat sat on the m", "response": "at."}) + "\n")
    cfg = SimpleNamespace(instruction="plain", init="gpt2", out=None, block_size=64)
    [(ids, labels)] = encode_rows(cfg, tok, read_rows(rows), [0])
    n = len(tok.encode("the cat sat on the m"))
    assert ids[:n] == tok.encode("the cat sat on the m") and set(labels[:n]) == {IGNORE}
    assert labels[n:] == ids[n:] == tok.encode("at.") + [tok.eos_id]
    assert tok.encode("the cat sat on the mat.") != ids[:-1]  # read whole, "mat" is one token


def test_a_recipe_names_what_init_set_apart_from_what_was_given(made, capsys):
    """--recipe fast over a Llama checkpoint: RMSNorm and no QK-norm are the checkpoint's, not
    the user's, and the note says so; a flag given is named as given."""
    capsys.readouterr()
    cfg = _configure(made, recipe="fast", lr=1e-3)
    assert (cfg.model.norm, cfg.model.qk_norm, cfg.lr) == ("rms", False, 1e-3)
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"--recipe fast: given, and used instead: --lr 0.001 (the recipe's --lr 0.003); from "
        f"--init {made['dir']}, used instead: --norm rms (the recipe's --norm layer), "
        f"--no-qk-norm (the recipe's --qk-norm)")


def _byte_fallback_tokenizer():
    """Llama 2's tokenizer in small: SentencePiece pieces carrying their space, and a byte
    piece ("<0xF0>") for each byte of a character it has no piece for (byte_fallback)."""
    from attnlab.interop.hf_tokenizer import HFTokenizer

    pieces = [("<unk>", 0.0), ("<s>", 0.0), ("</s>", 0.0),
              *((f"<0x{b:02X}>", 0.0) for b in range(256)),
              *((p, -1.0) for p in ("▁", "▁the", "▁cat", "▁sat"))]
    tok = Tokenizer(models.Unigram(pieces, unk_id=0, byte_fallback=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"),
                                           normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                     decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    return HFTokenizer(tok, {"unk": 0, "bos": 1, "eos": 2})


class _Says:
    """A causal LM that generates ``ids``, one a step (what ``continue_prompt`` reads)."""

    max_len = 64

    def __init__(self, ids):
        self.ids = ids

    def stream(self, prompt, max_new_tokens, **_):
        import torch

        return (torch.tensor([[i]]) for i in self.ids[:max_new_tokens])


@pytest.mark.parametrize("of", ["run", "checkpoint"])
@pytest.mark.parametrize("prompt, new", [("the 😀", "😀 cat"), ("the 日本", "語 sat"),
                                         ("the cat", " 😀 sat")])
def test_a_character_in_byte_pieces_after_a_prompt_ending_in_one_prints_whole(prompt, new, of):
    """A prompt ending in a character spelt in byte pieces ("😀": four of them), continued by
    another: generate (of a run or of a checkpoint directory) decoded the new pieces after the
    prompt's last byte alone, a run of five bytes that are no UTF-8, and printed "����" for
    the "😀" (streamed and in --json alike). Now it prints what transformers' decode of the
    whole output reads after the prompt."""
    from attnlab.commands.generate import continuation
    from attnlab.commands.hf_generate import reply

    tok = _byte_fallback_tokenizer()
    ids, whole = tok.encode(prompt), tok.encode(prompt + new)
    assert whole[:len(ids)] == ids and tok.decode(whole) == prompt + new
    args = SimpleNamespace(max_new_tokens=20, greedy=True, temperature=None, top_k=None,
                           top_p=None, stop=[], chat=None)
    model, printed = _Says(whole[len(ids):]), []
    out = (continuation(model, tok, ids, args, None, write=printed.append) if of == "run" else
           reply(model, tok, ids, [tok.eos_id], args, None, write=printed.append))
    assert "".join(printed) == out == new


@pytest.mark.parametrize("pieces", ["byte fallback", "byte-level bpe"])
@pytest.mark.parametrize("prompt, new, stop", [("the 日本", "語 sat", "本語"),
                                               ("the 😀", "😀 cat", "😀😀")])
def test_a_stop_string_begun_by_a_character_in_byte_pieces_stops_where_completed(
        prompt, new, stop, pieces):
    """--stop "本語" after the prompt "the 日本": the stop string appears as soon as the model
    writes "語", but generate looked for it after the prompt's last 2 tokens, 2 of the 3
    bytes of "本" (a byte-level BPE's, and Llama 2's byte pieces, spell a character in up to
    4), and printed "語 sat" on. Now it prints nothing, as --stop "rld" after "wor" does."""
    from attnlab.commands.generate import continuation
    from attnlab.tokenizers import BPETokenizer

    tok = (_byte_fallback_tokenizer() if pieces == "byte fallback" else
           BPETokenizer.fit(["the cat sat"], vocab_size=270))
    ids, whole = tok.encode(prompt), tok.encode(prompt + new)
    assert whole[:len(ids)] == ids and len(ids) > len(tok.encode(prompt[:-1])) + 1
    args = SimpleNamespace(max_new_tokens=20, greedy=True, temperature=None, top_k=None,
                           top_p=None, stop=[stop], chat=None)
    printed = []
    out = continuation(_Says(whole[len(ids):]), tok, ids, args, None, write=printed.append)
    assert "".join(printed) == out == ""


def test_byte_fallback_pieces_are_labelled_by_the_characters_they_spell():
    """plot attention and view of a Llama 2 / Mistral-style tokenizer (SentencePiece with byte
    fallback): "日" spelt in three byte pieces (<0xE6><0x97><0xA5>) was labelled "�" on each,
    and the space piece "▁" ''. Now each byte piece shows its character whole, "▁" a space,
    and a lone lead byte (an untrained model's) its escape."""
    tok = _byte_fallback_tokenizer()
    ids = tok.encode("the 日 cat\nsat")
    assert [tok.tokenizer.id_to_token(i) for i in ids][1:5] == ["▁", "<0xE6>", "<0x97>", "<0xA5>"]
    assert tok.labels(ids) == [" the", " ", "日", "日", "日", " cat", "\n", "s", "a", "t"]
    lone = tok.tokenizer.token_to_id("<0xD0>")
    assert tok.labels([*tok.encode("the"), lone, lone]) == [" the", "<0xD0>", "<0xD0>"]
    assert tok.labels([tok.sos_id, *tok.encode("the"), tok.eos_id],
                      skip_special_tokens=False) == ["<s>", " the", "</s>"]
