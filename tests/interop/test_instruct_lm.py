"""Instruction fine-tuning: ``attnlab train lm --init DIR --data FILE.jsonl``.

Offline: tiny random Qwen2 (ChatML template) and Llama (Llama 3 template) directories with a
byte-level BPE trained here (``test_llama_family.save_family``'s model, our tokenizer and
template). What is checked: the loss counts the assistant's tokens only, found in both
template layouts; a few dozen steps on "reverse: abc" -> "cba" lower the assistant-only
val_loss; the run answers ``generate --chat`` and ``predict`` through the same template, and
its export generates the same greedy tokens in transformers; resume is exact; bad rows and
long conversations are said in one line. Logits are compared in float32 at atol 1e-6 for the
loss, 1e-4 for models.
"""
import json
import math
import random
import re
import sys
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from torch.testing import assert_close

from .conftest import cli_without_torch, transformers  # (skips without the hf extra)
from .test_llama_family import _tiny
from ..training.loop_probe import probe_loop

import attnlab  # noqa: E402
from attnlab.cli import main  # noqa: E402
from attnlab.data.chat_rows import IGNORE, chat_example, cut_to, holdout, read_rows  # noqa: E402
from attnlab.errors import UsageError  # noqa: E402
from attnlab.interop.chat import end_of_turn_id, render  # noqa: E402
from attnlab.interop.checkpoint import read_checkpoint  # noqa: E402
from attnlab.tasks.lm.instruct import assistant_loss, padded  # noqa: E402
from attnlab.training.lm import lm_loss  # noqa: E402

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
          "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
LLAMA3 = ("{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}"
          "<|end_header_id|>\n\n{{ m['content'] | trim }}<|eot_id|>{% endfor %}"
          "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n"
          "{% endif %}")
STYLES = {  # family, template, special tokens (bos/eos first), end-of-turn token
    "chatml": ("qwen2", CHATML, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], "<|im_end|>"),
    "llama3": ("llama", LLAMA3, ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                                 "<|end_header_id|>", "<|eot_id|>"], "<|eot_id|>"),
}
# ChatML that refuses a system message, as Gemma's and Mistral's older templates do
NO_SYSTEM = ("{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not "
             "supported') }}{% endif %}" + CHATML)
WORDS = ["abc", "hello", "dog", "tea", "moon", "sun", "cat", "bed", "ace", "bad", "cab", "fed"]
CORPUS = [f"reverse: {w}" for w in WORDS] + WORDS[::-1] + ["system user assistant be brief"]
TRAIN = ["--max-steps", "40", "--warmup", "2", "--batch-size", "8", "--lr", "1e-2",
         "--block-size", "96", "--val-every", "20", "--threads", "1"]


def _tokenizer(style, template=True):
    _, chat, specials, _ = STYLES[style]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(CORPUS * 5, trainers.BpeTrainer(
        vocab_size=160, special_tokens=specials, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    eos = specials[-1] if style == "llama3" else specials[0]
    hf = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=specials[0],
                                              eos_token=eos)
    hf.chat_template = (chat if template is True else template) or None  # or another's
    return hf


def save_chat_model(d, style="chatml", template=True):
    """A tiny random model of the style's family with its tokenizer and chat template."""
    tok = _tokenizer(style, template)
    hf = _tiny(STYLES[style][0], vocab_size=len(tok))
    with torch.no_grad():  # smaller weights than the family tests': a model that trains
        for p in hf.parameters():
            p.mul_(0.25)
    hf.save_pretrained(d)
    tok.save_pretrained(d)
    return d


def _rows(n=60, seed=0):
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        w = "".join(rng.choice("abcdefgh") for _ in range(rng.randint(2, 5)))
        if i % 2:
            rows.append({"prompt": f"reverse: {w}", "response": w[::-1]})
        else:
            rows.append({"messages": [{"role": "system", "content": "be brief"},
                                      {"role": "user", "content": f"reverse: {w}"},
                                      {"role": "assistant", "content": w[::-1]}]})
    return rows


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


class _Dirs(dict):
    """The test directories, each written when a test first asks for it (pytest-xdist spreads
    the tests over workers, each building only what its tests read)."""

    MAKE = {"chatml": lambda d: save_chat_model(d / "qwen2"),
            "llama3": lambda d: save_chat_model(d / "llama", "llama3"),
            "base": lambda d: save_chat_model(d / "base", template=False),
            "no-system": lambda d: save_chat_model(d / "no-system", template=NO_SYSTEM),
            "rows": lambda d: _write(d / "rows.jsonl", _rows())}

    def __init__(self, tmp):
        super().__init__()
        self.tmp = tmp

    def __missing__(self, key):
        self[key] = self.MAKE[key](self.tmp)
        return self[key]


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    return _Dirs(tmp_path_factory.mktemp("instruct"))


# ---- which tokens the loss counts -------------------------------------------------------------
CONVERSATION = [{"role": "system", "content": "be brief"},
                {"role": "user", "content": "reverse: abc"},
                {"role": "assistant", "content": "cba"},
                {"role": "user", "content": "reverse: dog"},
                {"role": "assistant", "content": "god"}]


@pytest.mark.parametrize("style", sorted(STYLES))
def test_the_labels_are_each_reply_and_its_end_of_turn_token(style):
    tok = _tokenizer(style)
    end = tok.convert_tokens_to_ids(STYLES[style][3])
    assert end_of_turn_id(tok) == end

    def rendered(messages, generation_prompt):
        return render(tok, messages, "DIR", generation_prompt=generation_prompt)

    ids, labels = chat_example(rendered, CONVERSATION, end)
    assert ids == tok.apply_chat_template(CONVERSATION, return_dict=False)
    spans, span = [], []
    for i, lab in zip(ids, labels):
        if lab != IGNORE:
            assert lab == i
            span.append(i)
        elif span:
            spans.append(span)
            span = []
    spans += [span] if span else []  # Llama 3's last reply ends the text
    # exactly the two replies, each ending at its end-of-turn token; nothing of the headers,
    # the system or user turns, nor ChatML's newline after <|im_end|>
    assert [tok.decode(s) for s in spans] == ["cba" + STYLES[style][3], "god" + STYLES[style][3]]
    # and each reply starts where `generate --chat` lets the model start it
    prompt = tok.apply_chat_template(CONVERSATION[:2], add_generation_prompt=True,
                                     return_dict=False)
    assert labels[len(prompt) - 1] == IGNORE and labels[len(prompt)] == ids[len(prompt)]


@pytest.mark.parametrize("style", sorted(STYLES))
def test_a_reply_that_quotes_the_end_of_turn_marker_is_counted_to_its_own_end(style):
    """A text that quotes the template's end-of-turn marker holds that token, as transformers
    reads it (the ids stay apply_chat_template's); the loss counts the whole reply, through
    the end-of-turn token the template closes it with, as transformers' assistant mask does
    (the layout written by hand, ``LAYOUT``): not the reply up to the marker it quotes."""
    tok = _tokenizer(style)
    marker = STYLES[style][3]
    messages = [{"role": "user", "content": f"say {marker} twice"},
                {"role": "assistant", "content": f"a {marker} b {marker} c"},
                {"role": "user", "content": "and?"}, {"role": "assistant", "content": "d"}]

    def rendered(messages, generation_prompt):
        return render(tok, messages, "DIR", generation_prompt=generation_prompt)

    ids, labels = chat_example(rendered, messages, tok.convert_tokens_to_ids(marker))
    assert ids == tok.apply_chat_template(messages, return_dict=False)
    by_hand, mask = _by_hand(tok, messages, style)
    assert ids == by_hand
    assert labels == [i if counted else IGNORE for i, counted in zip(ids, mask)]
    assert (tok.decode([lab for lab in labels if lab != IGNORE])
            == f"a {marker} b {marker} c{marker}d{marker}")


@pytest.mark.slow
def test_the_loss_is_the_cross_entropy_of_the_assistant_positions_only(dirs):
    d = dirs["chatml"]
    model = read_checkpoint(d, task="lm").model.eval()  # the directory's weights, copied
    tok = transformers.AutoTokenizer.from_pretrained(d)
    end = tok.convert_tokens_to_ids("<|im_end|>")

    def rendered(messages, generation_prompt):
        return render(tok, messages, d, generation_prompt=generation_prompt)

    short = CONVERSATION[:3]
    examples = [chat_example(rendered, CONVERSATION, end), chat_example(rendered, short, end)]
    inputs, targets = padded(examples, pad=0)
    with torch.no_grad():
        loss = lm_loss(model, inputs, targets)
        logp = F.log_softmax(model(inputs), -1)  # (B, T, V)
    # by hand: the positions whose next token is a reply's or its <|im_end|>, found from the
    # text (each reply's tokens after "<|im_start|>assistant\n"), nothing else
    header = tok.encode("<|im_start|>assistant\n")
    terms = []
    for b, (ids, _) in enumerate(examples):
        for at in range(len(ids) - len(header)):
            if ids[at:at + len(header)] == header:
                start = at + len(header)
                stop = ids.index(end, start)
                terms += [-logp[b, t - 1, ids[t]] for t in range(start, stop + 1)]
    replies = ["cba", "god", "cba"]  # the two of the long conversation, the one of the short
    assert len(terms) == sum(len(tok.encode(r)) + 1 for r in replies)  # each with <|im_end|>
    assert_close(loss, torch.stack(terms).mean(), atol=1e-6, rtol=0)
    # a user token's target does not count: changed, the loss stays; counted (no mask), it moves
    user = tok.encode("reverse")[0]
    at = examples[0][0].index(user)  # the user's token, as a target of the position before it
    assert targets[0, at - 1] == IGNORE
    whole = torch.tensor(examples[0][0][1:])
    changed = whole.clone()
    changed[at - 1] = (user + 1) % len(tok)
    with torch.no_grad():
        unmasked = [lm_loss(model, inputs[:1, :len(whole)], t[None]) for t in (whole, changed)]
    assert not torch.equal(*unmasked)


# each template's layout written out by hand: (text, whether the loss counts it), per message
LAYOUT = {
    "chatml": lambda m: [(f"<|im_start|>{m['role']}\n", False),
                         *[(t, m["role"] == "assistant") for t in (m["content"], "<|im_end|>")],
                         ("\n", False)],
    "llama3": lambda m: [(f"<|start_header_id|>{m['role']}<|end_header_id|>\n\n", False),
                         *[(t, m["role"] == "assistant")
                           for t in (m["content"].strip(), "<|eot_id|>")]],
}


def _by_hand(tok, messages, style):
    """(ids, whether the loss counts each) of ``messages`` laid out by ``LAYOUT`` by hand."""
    ids, mask = [], []
    bos = [("<|begin_of_text|>", False)] if style == "llama3" else []
    for text, counted in bos + [p for m in messages for p in LAYOUT[style](m)]:
        piece = tok.encode(text, add_special_tokens=False)
        ids += piece
        mask += [counted] * len(piece)
    return ids, mask


TURNS = [("reverse: abc", "cba"), ("reverse: dog", " god "), ("and sun?", "nus")]


@pytest.mark.parametrize("style", sorted(STYLES))
def test_the_ids_trained_on_are_the_templates_and_the_mask_is_the_replies(dirs, tmp_path, style):
    """For 1, 2 and 3 turns, with and without a system message: the ids a run trains on (its
    --init tokenizer, and the one it saves and reads back on --resume and generate) are
    transformers' apply_chat_template of the directory's tokenizer; the loss counts exactly
    each reply and its end-of-turn token, found from the template's text written by hand;
    each reply starts where the generation prompt of the turns before it ends; and generate
    --chat's prompt is apply_chat_template(..., add_generation_prompt=True)."""
    from attnlab.interop.saved import load_any_tokenizer
    from attnlab.tasks.lm.checks import init_tokenizer
    from attnlab.tasks.lm.instruct import ChatSession, encode_rows

    d = dirs[style]
    theirs = transformers.AutoTokenizer.from_pretrained(d)
    ours = init_tokenizer(d)
    ours.save(tmp_path / "tokenizer.json")
    saved = load_any_tokenizer(tmp_path / "tokenizer.json")
    chats = []
    for system in (None, "be brief"):
        for n in (1, 2, 3):
            head = [{"role": "system", "content": system}] if system else []
            chats.append(head + [{"role": r, "content": t} for u, a in TURNS[:n]
                                 for r, t in (("user", u), ("assistant", a))])
    rows = read_rows(_write(tmp_path / "chats.jsonl", [{"messages": c} for c in chats]))
    cfg = SimpleNamespace(instruction="chat", init=str(d), out=None, seed=0, block_size=500)
    trained = encode_rows(cfg, ours, rows, list(range(len(chats))))
    assert encode_rows(cfg, saved, rows, list(range(len(chats)))) == trained
    for messages, (ids, labels) in zip(chats, trained):
        assert ids == theirs.apply_chat_template(messages, tokenize=True, return_dict=False)
        by_hand, mask = _by_hand(theirs, messages, style)
        assert ids == by_hand
        assert labels == [i if counted else IGNORE for i, counted in zip(ids, mask)]
        starts = [t for t in range(1, len(ids)) if mask[t] and not mask[t - 1]]
        replies = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
        assert [ids[:t] for t in starts] == [theirs.apply_chat_template(
            messages[:i], add_generation_prompt=True, return_dict=False) for i in replies]
    session = ChatSession(saved, tmp_path)
    for system in (None, "be brief"):
        head = [{"role": "system", "content": system}] if system else []
        assert session.ids("reverse: abc", system) == theirs.apply_chat_template(
            [*head, {"role": "user", "content": "reverse: abc"}], add_generation_prompt=True,
            return_dict=False)
    assert theirs.convert_tokens_to_ids(STYLES[style][3]) in session.stops


def test_a_conversation_longer_than_the_block_is_cut_at_its_end_and_counted():
    examples = [([1, 2, 3, 4, 5], [IGNORE, IGNORE, 3, 4, 5]), ([1, 2, 3], [IGNORE, 2, 3]),
                ([1, 2, 3, 4, 5, 6], [IGNORE] * 4 + [5, 6])]
    kept, said = cut_to(examples, 4)
    assert kept == [([1, 2, 3, 4], [IGNORE, IGNORE, 3, 4]), ([1, 2, 3], [IGNORE, 2, 3])]
    assert said == {"cut": 2, "dropped": 1, "lost": 3, "labelled": 7, "first_dropped": 2}


# ---- training ------------------------------------------------------------------------------
class _Start:
    """The assistant-only val_loss of the model as training starts, on the run's own batches."""

    def __init__(self):
        self.val_loss, self.trains, self.weights = None, None, None

    def on_train_start(self, loop):
        model = loop.module.model
        self.val_loss = assistant_loss(model, loop.val_loader)
        self.trains = sorted(n for n, p in model.named_parameters() if p.requires_grad)
        self.weights = {k.replace(".base.", "."): v.detach().clone()  # a LoRA layer's base
                        for k, v in model.state_dict().items() if "lora_" not in k}


@pytest.fixture(scope="module")
def trained(dirs, tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "sft"
    probe = _Start()
    with pytest.MonkeyPatch.context() as mp:
        probe_loop(mp, probe)
        assert main(["train", "lm", "--init", str(dirs["chatml"]), "--data", str(dirs["rows"]),
                     "--out", str(out), *TRAIN]) == 0
    return out, probe


@pytest.mark.slow
def test_fine_tuning_lowers_the_assistant_only_val_loss(trained, dirs):
    out, start = trained
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["steps"] == 40
    assert metrics["val_loss"] < 0.7 * start.val_loss, (metrics["val_loss"], start.val_loss)
    cfg = attnlab.loading.check_run_dir(out)[1]
    assert cfg.instruction == "chat" and cfg.data_sha256["data"]
    # evaluate measures the same held-out assistant tokens from the saved model
    assert main(["evaluate", str(out)]) == 0


@pytest.mark.slow
def test_the_run_answers_through_the_template_and_its_export_generates_the_same(
        trained, tmp_path, capsys):
    out, _ = trained
    capsys.readouterr()
    assert main(["generate", str(out), "--chat", "reverse: abc", "--greedy",
                 "--max-new-tokens", "12", "--threads", "1"]) == 0
    ours = capsys.readouterr().out
    # a system message the run's template (ChatML) keeps: read, not refused
    assert main(["generate", str(out), "--chat", "reverse: abc", "--system", "be brief",
                 "--greedy", "--max-new-tokens", "2", "--threads", "1"]) == 0
    capsys.readouterr()
    assert main(["predict", str(out), "--input", "reverse: abc", "--max-new-tokens", "12"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == ours.rstrip("\n")
    exported = tmp_path / "hf"
    assert main(["export", str(out), "--hf", str(exported)]) == 0
    tok = transformers.AutoTokenizer.from_pretrained(exported)
    model = transformers.AutoModelForCausalLM.from_pretrained(exported).eval()
    assert tok.chat_template == CHATML
    ids = tok.apply_chat_template([{"role": "user", "content": "reverse: abc"}],
                                  add_generation_prompt=True, return_dict=False)
    new = model.generate(torch.tensor([ids]), max_new_tokens=12, do_sample=False,
                         pad_token_id=tok.eos_token_id)[0, len(ids):].tolist()
    end = tok.convert_tokens_to_ids("<|im_end|>")
    assert model.generation_config.eos_token_id == [tok.eos_token_id, end]
    cut = new[:new.index(end)] if end in new else new  # generate stops after the stop token
    assert ours == tok.decode(cut, skip_special_tokens=True) + "\n"


@pytest.mark.slow
def test_lora_on_all_linear_layers_trains_the_named_adapters_only(dirs, tmp_path, monkeypatch):
    out = tmp_path / "lora"
    probe, last = _Start(), {}

    class Last:
        def on_train_batch_end(self, loop):
            if loop.step == loop.max_steps:
                model = loop.module.model.eval()
                with torch.no_grad():
                    last["logits"] = model(torch.arange(12)[None])
                last["base"] = {k.replace(".base.", "."): v.clone()
                                for k, v in model.state_dict().items() if "lora_" not in k}

    probe_loop(monkeypatch, probe, Last())
    assert main(["train", "lm", "--init", str(dirs["llama3"]), "--data", str(dirs["rows"]),
                 "--out", str(out), *TRAIN, "--max-steps", "6", "--lora-rank", "2",
                 "--lora-targets", "all-linear"]) == 0
    per_block = ["self_attn.qkv_proj", "self_attn.o_proj", "linear_net.gate_proj",
                 "linear_net.up_proj", "linear_net.down_proj"]
    assert probe.trains == sorted(f"decoder.layers.{i}.{name}.lora_{ab}" for i in range(2)
                                  for name in per_block for ab in "AB")
    # the base weights did not move; the merged run computes what the adapted model did
    assert last["base"].keys() == probe.weights.keys()
    for k, v in last["base"].items():
        assert torch.equal(v, probe.weights[k]), k
    for checkpoint in (None, "last"):  # the saved model, and the checkpoint's adapters merged
        model, _ = attnlab.load(out, checkpoint=checkpoint)
        with torch.no_grad():
            assert_close(model(torch.arange(12)[None]), last["logits"], atol=1e-5, rtol=1e-5)
    saved = load_file(out / "model.safetensors")
    assert not any("lora_" in k for k in saved)
    assert any(not torch.equal(saved[k], probe.weights[k]) for k in saved if "gate_proj" in k)


# ---- resume --------------------------------------------------------------------------------
class _Crash(Exception):
    pass


@pytest.mark.slow
def test_resume_is_exact_and_refuses_a_changed_file(dirs, tmp_path, monkeypatch, capsys):
    rows = _write(tmp_path / "rows.jsonl", _rows(30, seed=1))
    args = ["--init", str(dirs["chatml"]), "--data", str(rows), *TRAIN, "--max-steps", "12",
            "--checkpoint-every", "5", "--dropout", "0.1"]
    out = tmp_path / "resumed"

    class CrashAt:
        def on_train_batch_end(self, loop):
            if loop.step == 7:
                raise _Crash

    with monkeypatch.context() as m:
        probe_loop(m, CrashAt())
        with pytest.raises(_Crash):
            main(["train", "lm", "--out", str(out), *args])
    assert main(["train", "lm", "--out", str(out), "--resume"]) == 0  # the rest: config.yaml's
    whole = tmp_path / "whole"
    assert main(["train", "lm", "--out", str(whole), *args]) == 0
    resumed = load_file(out / "model.safetensors")
    uninterrupted = load_file(whole / "model.safetensors")
    for name in resumed:
        assert_close(resumed[name], uninterrupted[name], rtol=1e-5, atol=1e-6)
    _write(rows, _rows(30, seed=2))
    capsys.readouterr()
    assert main(["train", "lm", "--out", str(out), "--resume", "--max-steps", "14"]) == 2
    assert "changed since this run started" in capsys.readouterr().err


@pytest.mark.slow
def test_evaluate_data_whose_replies_lie_beyond_the_block_is_refused_naming_no_flag(
        trained, tmp_path, capsys):
    """evaluate has no --block-size: its line says the run's, and what to change in the file."""
    out, _ = trained
    long = {"messages": [{"role": "user", "content": "reverse: " + "abc " * 200},
                         {"role": "assistant", "content": "cba"}]}
    data = _write(tmp_path / "long.jsonl", [long] * 3)
    capsys.readouterr()
    assert main(["evaluate", str(out), "--data", str(data)]) == 2
    assert capsys.readouterr().err == (
        f"attnlab: error: --data {data}: no conversation has an assistant token within the "
        f"run's block size, 96 tokens, fixed when it trained; give shorter conversations\n")


# ---- what is refused, in one line, with nothing written --------------------------------------
BAD = [
    ('{"messages": [}\n', "line 1: not valid JSON"),
    ('{"prompt": "a", "response": "b"}\n{"text": "x"}\n', "line 2: no \"messages\" or \"prompt\""),
    ('{"messages": [{"role": "tool", "content": "x"}, {"role": "assistant", "content": "y"}]}\n',
     "line 1, message 1: role 'tool' is not one of system, user, assistant; tool turns (a "
     "call and its result) are not read here: leave the row out, or give the result as text "
     "in a user message"),
    ('{"messages": [{"role": "user", "content": "x"}]}\n',
     "line 1: the conversation has no assistant turn"),
    ('{"prompt": "x"}\n', "line 1: a \"prompt\" row needs a \"response\""),
    ('{"messages": [{"role": "user", "content": 3}, {"role": "assistant", "content": "y"}]}\n',
     "line 1, message 1: \"content\" must be text"),
    ("\n\n", ": the file has no rows"),
    # an empty reply trained the model to answer nothing (its end-of-turn token alone)
    ('{"prompt": "x", "response": ""}\n', 'line 1, "response": the assistant\'s reply is empty'),
    ('{"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": " \\n"}]}\n',
     "line 1, message 2: the assistant's reply is empty"),
    # an empty user message was trained on as a turn with no text; a blank system message is
    # told how to write an empty one (an empty system turn, in place of the default one)
    ('{"prompt": "", "response": "y"}\n',
     'line 1, "prompt": the user message is empty, which would be read as a user turn with no '
     'text (not as none); give it text or leave it out'),
    ('{"prompt": "a", "response": "b"}\n{"messages": [{"role": "system", "content": " "}, '
     '{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]}\n',
     'line 2, message 1: the system message is blank; give it text, or "" for an empty '
     'system turn (in place of a chat template\'s default one)'),
    ('{"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}, '
     '{"role": "user", "content": ""}, {"role": "assistant", "content": "z"}]}\n',
     "line 1, message 3: the user message is empty"),
    # was refused as a conversation the template "cannot render" (the empty one before it)
    ('{"messages": [{"role": "assistant", "content": "hi"}, {"role": "user", "content": "x"}, '
     '{"role": "assistant", "content": "y"}]}\n',
     "line 1, message 1: the conversation opens with an assistant turn, which answers nothing "
     "(a chat template renders no conversation before it, so where its reply starts is not "
     "known); open it with a user or system message"),
    # other tools' forms are told how they are written here (ShareGPT's first row was told to
    # be prepared as texts by train lm)
    ('{"conversations": [{"from": "human", "value": "x"}, {"from": "gpt", "value": "y"}]}\n',
     'line 1: no "messages" or "prompt" (fields: conversations); a row is {"messages": [...]} '
     'or {"prompt": ..., "response": ...}; ShareGPT\'s "conversations" is "messages", and a '
     'message\'s "from" and "value" are "role" and "content" here ("human" is "user", "gpt" is '
     '"assistant")'),
    ('{"messages": [{"from": "human", "value": "x"}, {"from": "gpt", "value": "y"}]}\n',
     'line 1, message 1: no "role"; ShareGPT\'s "from" and "value" are "role" and "content" '
     'here'),
    ('{"prompt": "x", "response": "y"}\n{"instruction": "x", "input": "z", "output": "y"}\n',
     'line 2: no "messages" or "prompt" (fields: instruction, input, output); a row is '
     '{"messages": [...]} or {"prompt": ..., "response": ...}; write "instruction" and "input" '
     'as one "prompt" (joined as the model should read them) and "output" as the "response"'),
    ('{"instruction": "x", "context": "z", "response": "y", "category": "qa"}\n',  # Dolly's
     'line 1: no "messages" or "prompt" (fields: instruction, context, response, category); a '
     'row is {"messages": [...]} or {"prompt": ..., "response": ...}; write "instruction" and '
     '"context" as one "prompt" (joined as the model should read them)'),
    # a field the run should read was dropped without a word: the system message (the
    # row-level "system" of Anthropic's API), the input of a half-converted Alpaca row
    ('{"system": "be brief", "prompt": "x", "response": "y"}\n',
     'line 1: field "system" is not read (a row\'s other fields are ignored); give the system '
     'message first in "messages", {"role": "system", "content": ...}'),
    ('{"system": "be brief", "messages": [{"role": "user", "content": "x"}, '
     '{"role": "assistant", "content": "y"}]}\n', 'line 1: field "system" is not read'),
    ('{"prompt": "reverse", "input": "ab", "response": "ba", "id": 3}\n',
     'line 1: field "input" is not read beside "prompt" (a row\'s other fields are ignored); '
     'join it into "prompt" as the model should read it'),
]


@pytest.mark.parametrize("text, message", BAD)
def test_bad_rows_are_one_line_naming_the_file_and_line(tmp_path, text, message):
    data = tmp_path / "bad.jsonl"
    data.write_text(text, encoding="utf-8")
    with pytest.raises(UsageError) as refused:
        read_rows(data)
    assert str(refused.value).startswith(f"--data {data}") and message in str(refused.value)
    assert len(str(refused.value).splitlines()) == 1


def test_an_empty_user_message_is_read_as_it_was_for_a_run_that_began_on_it(tmp_path):
    data = _write(tmp_path / "rows.jsonl", [{"prompt": "", "response": "y"}])
    assert read_rows(data, new=False).conversations == [
        [{"role": "user", "content": ""}, {"role": "assistant", "content": "y"}]]


# a template with a default system prompt, as Qwen2.5's ("You are Qwen..."), which an empty
# system message replaces with an empty system turn
DEFAULT_SYSTEM = ("{% if messages[0]['role'] == 'system' %}<|im_start|>system\n"
                  "{{ messages[0]['content'] }}<|im_end|>\n{% else %}<|im_start|>system\nbe "
                  "brief<|im_end|>\n{% endif %}{% for m in messages %}{% if m['role'] != "
                  "'system' %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                  "{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
                  "{% endif %}")


@pytest.mark.parametrize("template", [DEFAULT_SYSTEM, CHATML])
def test_an_empty_system_message_is_trained_as_an_empty_system_turn_and_said(tmp_path,
                                                                              template):
    """An empty system message was refused, and its advice (leave it out) brought back the
    template's default system prompt: it is how Hugging Face users keep that default out.
    Read now, it is rendered as transformers renders it, one note says so, and generate
    --chat --system '' asks in that layout."""
    from attnlab.interop.hf_tokenizer import HFTokenizer
    from attnlab.tasks.lm.instruct import ChatSession, encode_splits

    theirs = _tokenizer("chatml", template)
    tok = HFTokenizer.from_transformers(theirs)
    cfg = SimpleNamespace(instruction="chat", init="DIR", out=None, seed=0, block_size=96)
    rows = _rows(20)
    for i in (2, 4):  # (rows of messages: system, user, assistant)
        rows[i]["messages"][0]["content"] = ""
    data = _write(tmp_path / "rows.jsonl", rows)
    found = encode_splits(cfg, tok, read_rows(data))
    trained = {tuple(ids) for ids, _ in found.train + found.val}
    for i in (2, 4):
        assert tuple(theirs.apply_chat_template(rows[i]["messages"], return_dict=False)) in trained
    instead = " in place of its default one" if template == DEFAULT_SYSTEM else ""
    assert [n for n in found.notes if "empty system" in n] == [
        f"note: --data {data}: 2 rows have an empty system message (line 3, ...): the chat "
        f"template renders an empty system turn{instead}; generate --chat --system '' asks in "
        f"that layout"]
    empty = [{"role": "system", "content": ""}, {"role": "user", "content": "reverse: ab"}]
    assert ChatSession(tok, tmp_path).ids("reverse: ab", "") == theirs.apply_chat_template(
        empty, add_generation_prompt=True, return_dict=False)
    assert theirs.decode(theirs.apply_chat_template(empty, return_dict=False)).startswith(
        "<|im_start|>system\n<|im_end|>\n<|im_start|>user")
    with pytest.raises(UsageError, match="message 2: the user message is empty"):
        read_rows(_write(tmp_path / "user.jsonl", [{"messages": empty[:1] + [
            {"role": "user", "content": ""}, {"role": "assistant", "content": "y"}]}]))


def test_a_system_or_input_field_that_holds_nothing_is_let_be(tmp_path):
    """(Alpaca's rows mostly have an empty "input": nothing is lost, nothing refused.)"""
    data = _write(tmp_path / "rows.jsonl", [{"prompt": "x", "input": "", "context": " ",
                                              "system": None, "response": "y"}])
    assert read_rows(data).conversations == [[{"role": "user", "content": "x"},
                                              {"role": "assistant", "content": "y"}]]


def test_a_field_whose_text_the_row_already_reads_is_let_be(tmp_path):
    """A converted row that kept its raw fields was refused though nothing would be lost: a
    row-level "system" already first in "messages", Alpaca's "instruction" and "input"
    already inside "prompt". A field whose text is not there is still refused."""
    system = {"system": "be brief", "messages": [
        {"role": "system", "content": "be brief"}, {"role": "user", "content": "x"},
        {"role": "assistant", "content": "y"}]}
    alpaca = {"instruction": "Give three tips", "input": "for sleep", "output": "a b c",
              "prompt": "### Instruction:\nGive three tips\n\n### Input:\nfor sleep\n\n"
                        "### Response:\n", "response": "a b c"}
    rows = read_rows(_write(tmp_path / "rows.jsonl", [system, alpaca]))
    assert rows.conversations[0] == system["messages"]
    assert rows.conversations[1][0] == {"role": "user", "content": alpaca["prompt"]}
    with pytest.raises(UsageError, match='field "input" is not read beside "prompt"'):
        read_rows(_write(tmp_path / "other.jsonl", [{**alpaca, "input": "for work"}]))


def test_the_refusal_of_turns_after_the_last_reply_counts_the_rows(tmp_path):
    """A dump whose rows often end on a user's "thanks!" was refused one row at a time: the
    one line says how many rows end so."""
    from attnlab.data.chat_rows import check_last_turns

    rows = _rows(6)
    for i in (2, 4):  # (rows of messages: system, user, assistant)
        rows[i] = {"messages": [*rows[i]["messages"], {"role": "user", "content": "thanks!"}]}
    with pytest.raises(UsageError, match=r"line 3, message 4: a user turn after the last "
                                         r"assistant reply, .* \(2 rows end so\); end"):
        check_last_turns(read_rows(_write(tmp_path / "rows.jsonl", rows)))


def test_a_turn_after_the_last_reply_is_refused_for_a_new_run_only(dirs, tmp_path, capsys):
    """A user turn after the last reply was trained on without a word, though no step reads
    it (no counted token follows it): the row had likely lost its reply."""
    from attnlab.runs import record_data_files
    from attnlab.tasks.lm.checks import check_rows

    rows = _rows(20)
    rows[5] = {"messages": [*rows[4]["messages"], {"role": "user", "content": "and dog?"}]}
    data, out = _write(tmp_path / "rows.jsonl", rows), tmp_path / "run"
    capsys.readouterr()
    assert main(["train", "lm", "--init", str(dirs["chatml"]), "--data", str(data),
                 "--out", str(out), *TRAIN, "--max-steps", "1"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"attnlab: error: --data {data} line 6, message 4: a user turn after the last "
        f"assistant reply, which the loss never reads (no reply follows it); end the "
        f"conversation with the assistant's reply"]
    assert not out.exists()
    # a run that started on such a file (before these checks) resumes as it began, as one
    # with a row-level "system" (refused by a new run too: BAD)
    rows[6] = {"system": "be brief", **rows[6]}
    data = _write(tmp_path / "started.jsonl", rows)
    resumed = {"data": str(data), "resume": True, "init": str(dirs["chatml"]), "seed": 0,
               "instruction": "chat", **record_data_files({"data": data})}
    assert len(check_rows(resumed, lambda cfg: None).conversations) == 20


@pytest.mark.slow
@pytest.mark.parametrize("text, message", BAD[:2])
def test_train_refuses_bad_rows_before_the_run_directory(dirs, tmp_path, capsys, text, message):
    data = tmp_path / "bad.jsonl"
    data.write_text(text, encoding="utf-8")
    out = tmp_path / "run"
    assert main(["train", "lm", "--init", str(dirs["chatml"]), "--data", str(data),
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"attnlab: error: --data {data}") and message in err, err
    assert len(err.splitlines()) == 1 and not out.exists()


@pytest.mark.slow
def test_bad_rows_are_refused_before_torch_is_imported(dirs, tmp_path):
    data = tmp_path / "bad.jsonl"
    data.write_text(BAD[2][0], encoding="utf-8")
    done = cli_without_torch(["train", "lm", "--init", str(dirs["chatml"]), "--data", str(data),
                              "--out", str(tmp_path / "run")])
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [f"attnlab: error: --data {data} {BAD[2][1]}"]


def test_a_row_the_template_refuses_is_one_line_before_the_run_directory(dirs, tmp_path,
                                                                         capsys):
    rows = [r for r in _rows(20) if "prompt" in r]  # rendered without a system message
    rows.insert(7, _rows(1)[0])  # file line 8: a system message, which the template refuses
    data = _write(tmp_path / "rows.jsonl", rows)
    out = tmp_path / "run"
    capsys.readouterr()
    assert main(["train", "lm", "--init", str(dirs["no-system"]), "--data", str(data),
                 "--out", str(out), "--block-size", "64"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"attnlab: error: --data {data} line 8: {dirs['no-system']}: its chat "
                   f"template cannot render this conversation (System role not supported)")
    assert not out.exists()


def test_val_batches_with_instruction_rows_is_refused_as_unused(dirs, tmp_path, capsys):
    """Instruction rows are validated whole (the loop's val_loss is metrics.json's), so a
    --val-batches given there would cap nothing: refused by name, before the run directory."""
    out = tmp_path / "run"
    capsys.readouterr()
    assert main(["train", "lm", "--init", str(dirs["chatml"]), "--data", str(dirs["rows"]),
                 "--out", str(out), "--val-batches", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"attnlab: error: --val-batches: for a text corpus only; --data "
                   f"{dirs['rows']} holds instruction rows, whose every held-out row is "
                   f"validated (docs/finetuning.md)")
    assert not out.exists()


@pytest.mark.slow
def test_messages_rows_need_a_chat_template_and_rows_need_init(dirs, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "lm", "--init", str(dirs["base"]), "--data", str(dirs["rows"]),
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"attnlab: error: --data {dirs['rows']} line 1: a \"messages\" row needs a "
                   f"chat template, and --init {dirs['base']} has none (a base model); write it "
                   f"as \"prompt\" and \"response\", or start from an instruct checkpoint")
    assert main(["train", "lm", "--data", str(dirs["rows"]), "--out", str(out)]) == 2
    assert "fine-tune a pretrained model: give --init DIR" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.slow
def test_long_conversations_are_cut_and_said_and_none_left_is_refused(dirs, tmp_path, capsys):
    long = {"messages": [{"role": "user", "content": "reverse: abc"},
                         {"role": "assistant", "content": "cba " * 60}]}
    data = _write(tmp_path / "long.jsonl", [long, *_rows(20)])
    out = tmp_path / "run"
    assert main(["train", "lm", "--init", str(dirs["chatml"]), "--data", str(data),
                 "--out", str(out), *TRAIN, "--max-steps", "2"]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if "cut at the end" in line]
    assert len(notes) == 1, notes
    said = re.fullmatch(rf"note: --data {re.escape(str(data))}: 1 of 19 conversations is longer "
                        rf"than --block-size 96 \+ 1 tokens and was cut at the end: (\d+) of "
                        rf"(\d+) assistant tokens are left out", notes[0])
    assert said and 0 < int(said[1]) < int(said[2]), notes[0]
    long = {"messages": [{"role": "user", "content": "reverse: " + "abc " * 30},
                         {"role": "assistant", "content": "cba"}]}
    # every reply beyond the block: nothing to train on, refused in one line, nothing written
    data = _write(tmp_path / "all-long.jsonl", [long] * 10)
    out = tmp_path / "none"
    assert main(["train", "lm", "--init", str(dirs["chatml"]), "--data", str(data),
                 "--out", str(out), *TRAIN, "--block-size", "8"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"attnlab: error: --data {data}: no conversation has an assistant token "
                   f"within --block-size 8; raise --block-size")
    assert not out.exists()


# a template that closes a reply with a newline alone: no token there ends generation
NO_END = ("{% for m in messages %}{{ m['role'] }}:{{ ' ' + m['content'] }}\n{% endfor %}"
          "{% if add_generation_prompt %}assistant:{% endif %}")


@pytest.mark.slow
def test_a_template_whose_replies_end_with_no_stop_token_is_said(dirs, tmp_path, capsys):
    """With such a template the loss counts no token generation stops at, so the run never
    learns to end a reply and generate --chat runs to --max-new-tokens; nothing said so."""
    no_end = save_chat_model(tmp_path / "no-end", template=NO_END)
    for init, said in ((no_end, True), (dirs["chatml"], False)):
        out = tmp_path / f"run-{said}"
        assert main(["train", "lm", "--init", str(init), "--data", str(dirs["rows"]),
                     "--out", str(out), *TRAIN, "--max-steps", "1"]) == 0
        notes = [line for line in capsys.readouterr().err.splitlines()
                 if "does not learn to end its replies" in line]
        assert notes == ([f"note: --init {init}'s chat template ends an assistant's reply with "
                          f"no end-of-turn or eos token, so the run does not learn to end its "
                          f"replies: generate --chat runs on to --max-new-tokens unless a "
                          f"--stop string ends it"] if said else [])


@pytest.mark.slow
def test_a_base_model_learns_prompt_then_response_then_eos(dirs, tmp_path, capsys):
    rows = _write(tmp_path / "plain.jsonl", [r for r in _rows(40) if "prompt" in r])
    out = tmp_path / "plain"
    assert main(["train", "lm", "--init", str(dirs["base"]), "--data", str(rows),
                 "--out", str(out), *TRAIN, "--max-steps", "3"]) == 0
    cfg = attnlab.loading.check_run_dir(out)[1]
    assert cfg.instruction == "plain"
    capsys.readouterr()
    assert main(["generate", str(out), "--chat", "hi"]) == 2
    assert "has no chat template (its tokenizer.json has none" in capsys.readouterr().err


@pytest.mark.slow
def test_epochs_with_accumulate_pass_over_the_rows_once_each(dirs, tmp_path):
    """--epochs 1 --accumulate 3 made as many steps as --accumulate 1, each of 3 batches:
    three passes over the rows (review)."""
    out = tmp_path / "run"
    assert main(["train", "lm", "--init", str(dirs["chatml"]), "--data", str(dirs["rows"]),
                 "--out", str(out), "--epochs", "1", "--batch-size", "4", "--accumulate", "3",
                 "--block-size", "64", "--warmup", "0", "--threads", "1"]) == 0
    rows = sum(1 for _ in open(dirs["rows"], encoding="utf-8"))
    held_out = round(rows / 10)  # a tenth of the rows validates
    batches = math.ceil((rows - held_out) / 4)
    assert json.loads((out / "metrics.json").read_text())["steps"] == math.ceil(batches / 3)


def test_held_out_rows_that_repeat_a_training_row_are_said(tmp_path):
    """A file with repeated rows put a row's twin in the held-out tenth without a word, and
    val_loss measured a conversation the model was trained on as if unseen."""
    from attnlab.interop.hf_tokenizer import HFTokenizer
    from attnlab.tasks.lm.instruct import encode_splits

    tok = HFTokenizer.from_transformers(_tokenizer("chatml"))
    cfg = SimpleNamespace(instruction="chat", init="DIR", out=None, seed=0, block_size=96)
    rows = _rows(10)
    twice = read_rows(_write(tmp_path / "twice.jsonl", rows + rows))  # line i + 10 repeats i
    notes = [n for n in encode_splits(cfg, tok, twice).notes if "repeat a training row" in n]
    train, val = holdout(20, 0, where="x")
    lines = [(i + 1, (i + 10) % 20 + 1) for i in val]
    assert len(val) == 2 and notes == [
        f"note: --data {twice.path}: 2 of 2 held-out rows repeat a training row "
        f"(line {lines[0][0]} repeats line {lines[0][1]}, line {lines[1][0]} repeats line "
        f"{lines[1][1]}), so val_loss measures them as trained on; leave the repeats out of "
        f"the file to measure unseen rows"]
    once = read_rows(_write(tmp_path / "once.jsonl", rows + _rows(10, seed=1)))
    assert not [n for n in encode_splits(cfg, tok, once).notes if "repeat a training row" in n]


def test_the_held_out_rows_are_named_with_their_assistant_tokens(tmp_path):
    """A run said nothing of the tenth of the rows it held out: which lines val_loss measures
    (and the run never trains on), and over how many assistant tokens it is averaged."""
    from attnlab.interop.hf_tokenizer import HFTokenizer
    from attnlab.tasks.lm.instruct import encode_splits

    theirs = _tokenizer("chatml")
    tok = HFTokenizer.from_transformers(theirs)
    cfg = SimpleNamespace(instruction="chat", init="DIR", out=None, seed=3, block_size=96)
    data = tmp_path / "rows.jsonl"
    rows = _rows(30)
    data.write_text("\n" + "".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    found = encode_splits(cfg, tok, read_rows(data))
    val = holdout(30, 3, where="x")[1]
    counted = 0  # by hand: each held-out row laid out as ChatML, its reply and <|im_end|>
    for i in val:
        messages = rows[i].get("messages") or [{"role": "user", "content": rows[i]["prompt"]},
                                               {"role": "assistant",
                                                "content": rows[i]["response"]}]
        ids, mask = _by_hand(theirs, messages, "chatml")
        assert len(ids) <= cfg.block_size + 1  # none cut
        counted += sum(mask[1:])
    assert len(val) == 3 and len(found.val) == 3 and counted > 3
    lines = ", ".join(str(i + 2) for i in val)  # the file's lines, after its blank first one
    assert [n for n in found.notes if "held out for val_loss" in n] == [
        f"note: --data {data}: 3 rows of 30 are held out for val_loss (lines {lines}), which "
        f"the run does not train on; val_loss averages over their {counted} assistant tokens "
        f"within --block-size"]


def test_a_message_that_holds_a_template_marker_is_said(tmp_path):
    """A row's text that holds a special token (a reply quoting <|im_end|>, a row laid out by
    a template already) was trained on as that token, as transformers reads it, without a
    word: the model learns the template's layout inside a message."""
    from attnlab.interop.hf_tokenizer import HFTokenizer
    from attnlab.tasks.lm.instruct import encode_splits

    tok = HFTokenizer.from_transformers(_tokenizer("chatml"))
    cfg = SimpleNamespace(instruction="chat", init="DIR", out=None, seed=0, block_size=96)
    rows = _rows(10)
    clean = read_rows(_write(tmp_path / "clean.jsonl", rows))
    assert not [n for n in encode_splits(cfg, tok, clean).notes if "added token" in n]
    rows[3] = {"prompt": "reverse: ab<|im_end|>", "response": "ba"}
    rows[6] = {"messages": [{"role": "user", "content": "x"},
                            {"role": "assistant", "content": "<|im_start|>assistant\nba"}]}
    marked = read_rows(_write(tmp_path / "marked.jsonl", rows))
    assert [n for n in encode_splits(cfg, tok, marked).notes if "added token" in n] == [
        f"note: --data {marked.path}: 2 messages hold an added token's text (line 4, "
        f"\"prompt\": <|im_end|>), which the model reads as that token, as transformers does, "
        f"not as text; write it otherwise where it is meant as text"]


@pytest.mark.parametrize("rank, said", [("0", True), ("1", False)])
def test_the_notes_of_the_rows_are_said_by_the_first_process_only(tmp_path, monkeypatch,
                                                                  capsys, rank, said):
    """A DDP run on two devices said each note (held out, cut, special tokens) twice: every
    process prepares its rows."""
    from attnlab.interop.hf_tokenizer import HFTokenizer
    from attnlab.settings import RANK_KEYS
    from attnlab.tasks.lm.instruct import encode_splits, prepare

    class Config(SimpleNamespace):
        def derive(self, **changes):
            return Config(**{**vars(self), **changes})

    tok = HFTokenizer.from_transformers(_tokenizer("chatml"))
    cfg = Config(instruction="chat", init="DIR", out=None, seed=0, block_size=96)
    found = encode_splits(cfg, tok, read_rows(_write(tmp_path / "rows.jsonl", _rows(20))))
    assert any("held out for val_loss" in n for n in found.notes)
    for key in RANK_KEYS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("LOCAL_RANK", rank)
    capsys.readouterr()
    _, _, train, val = prepare(cfg, tmp_path / "run", found, tok)
    assert (train, val) == (found.train, found.val)
    assert capsys.readouterr().err == ("".join(n + "\n" for n in found.notes) if said else "")


def test_evaluate_data_reads_a_file_with_an_empty_message_as_the_run_did(tmp_path):
    """``evaluate RUN --data FILE`` refused the very file a run had trained on when it held an
    empty user message (read as rows not yet trained on); it measures it now, every row."""
    from attnlab.interop.hf_tokenizer import HFTokenizer
    from attnlab.tasks.lm.instruct import evaluate_loss

    theirs = _tokenizer("chatml")
    tok = HFTokenizer.from_transformers(theirs)
    rows = [*_rows(6), {"prompt": "", "response": "ba"},
            {"messages": [{"role": "user", "content": " "}, {"role": "assistant", "content": "x"}]}]
    data = _write(tmp_path / "rows.jsonl", rows)
    with pytest.raises(UsageError, match="line 7, \"prompt\": the user message is empty"):
        read_rows(data)  # as a new run reads it
    torch.manual_seed(0)
    model = torch.nn.Embedding(len(theirs), len(theirs))  # ids (B, T) -> logits (B, T, V)
    cfg = SimpleNamespace(instruction="chat", init="DIR", out=None, seed=0, block_size=96,
                          batch_size=3)
    total, count = 0.0, 0  # by hand: each row as transformers lays it out, its replies counted
    for row in rows:
        messages = row.get("messages") or [{"role": "user", "content": row["prompt"]},
                                           {"role": "assistant", "content": row["response"]}]
        ids, mask = _by_hand(theirs, messages, "chatml")
        assert ids == theirs.apply_chat_template(messages, return_dict=False)
        with torch.no_grad():
            logp = F.log_softmax(model(torch.tensor(ids[:-1])), -1)  # (T, V)
        total -= sum(float(logp[t - 1, ids[t]]) for t in range(1, len(ids)) if mask[t])
        count += sum(mask[1:])
    assert_close(evaluate_loss(cfg, model, tok, str(data)), total / count, atol=1e-5, rtol=0)


def test_no_reply_within_the_block_says_what_to_change_in_train_and_in_evaluate(tmp_path):
    """Rows whose every reply lies beyond the block: ``train`` says to raise --block-size;
    ``evaluate RUN --data FILE`` said so too, naming a flag evaluate does not have. A run's
    block size is fixed when it trains, so evaluate asks for shorter conversations."""
    from attnlab.interop.hf_tokenizer import HFTokenizer
    from attnlab.tasks.lm.instruct import encode_splits, evaluate_loss

    theirs = _tokenizer("chatml")
    tok = HFTokenizer.from_transformers(theirs)
    long = {"messages": [{"role": "user", "content": "reverse: " + "abc " * 30},
                         {"role": "assistant", "content": "cba"}]}
    data = _write(tmp_path / "long.jsonl", [long] * 10)
    cfg = SimpleNamespace(instruction="chat", init="DIR", out=None, seed=0, block_size=8,
                          batch_size=3)
    with pytest.raises(UsageError) as training:
        encode_splits(cfg, tok, read_rows(data))
    assert str(training.value) == (f"--data {data}: no conversation has an assistant token "
                                   f"within --block-size 8; raise --block-size")
    model = torch.nn.Embedding(len(theirs), len(theirs))  # ids (B, T) -> logits (B, T, V)
    with pytest.raises(UsageError) as evaluating:
        evaluate_loss(cfg, model, tok, str(data))
    assert str(evaluating.value) == (f"--data {data}: no conversation has an assistant token "
                                     f"within the run's block size, 8 tokens, fixed when it "
                                     f"trained; give shorter conversations")


def test_a_message_that_holds_an_added_token_not_marked_special_is_said(tmp_path):
    """The note searched special tokens only, and missed added ones that are not (Qwen's
    <tool_call>, Qwen3's <think>, add_tokens' own), which transformers reads as one token
    too. Added tokens of spaces alone (some code models') are text, and not said."""
    from attnlab.interop.hf_tokenizer import HFTokenizer
    from attnlab.tasks.lm.instruct import encode_splits

    theirs = _tokenizer("chatml")
    theirs.add_tokens(["<tool_call>", "    "])  # special_tokens=False
    call = theirs.convert_tokens_to_ids("<tool_call>")
    assert call in theirs.encode("call: <tool_call> now", add_special_tokens=False)
    tok = HFTokenizer.from_transformers(theirs)
    cfg = SimpleNamespace(instruction="chat", init="DIR", out=None, seed=0, block_size=96)
    rows = _rows(10)
    rows[5] = {"prompt": "reverse:    ab", "response": "ba"}  # the four spaces: text
    spaces = read_rows(_write(tmp_path / "spaces.jsonl", rows))
    assert not [n for n in encode_splits(cfg, tok, spaces).notes if "added token" in n]
    rows[7] = {"prompt": "reverse: ab", "response": "<tool_call>ba"}
    marked = read_rows(_write(tmp_path / "marked.jsonl", rows))
    found = encode_splits(cfg, tok, marked)
    # the run trains on it as that one token, as transformers reads it
    assert len([ids for ids, _ in found.train + found.val if call in ids]) == 1
    assert [n for n in found.notes if "added token" in n] == [
        f"note: --data {marked.path}: 1 message holds an added token's text (line 8, "
        f"\"response\": <tool_call>), which the model reads as that token, as transformers "
        f"does, not as text; write it otherwise where it is meant as text"]


def test_a_held_out_row_cut_to_nothing_is_said_as_not_measured(tmp_path, capsys):
    """A held-out conversation whose reply lay beyond --block-size was said to be "not
    trained on", though held-out rows never are (nor those evaluate reads): it is not
    measured by val_loss."""
    from attnlab.interop.hf_tokenizer import HFTokenizer
    from attnlab.tasks.lm.instruct import encode_splits, evaluate_loss

    theirs = _tokenizer("chatml")
    tok = HFTokenizer.from_transformers(theirs)
    cfg = SimpleNamespace(instruction="chat", init="DIR", out=None, seed=0, block_size=80,
                          batch_size=4)
    rows = _rows(20)
    train, val = holdout(20, 0, where="x")
    for i in (val[0], train[0]):  # a reply past the block, held out and trained on
        rows[i] = {"prompt": "reverse: " + "abc " * 40, "response": "cba"}
    found = encode_splits(cfg, tok, read_rows(_write(tmp_path / "rows.jsonl", rows)))
    cut = [n for n in found.notes if "cut at the end" in n]
    assert len(cut) == 2, found.notes
    # each named by its file line (line n is row n - 1)
    assert cut[0].endswith(f"(1 conversation has none left and is not trained on: line "
                           f"{train[0] + 1})")
    assert cut[1].startswith(f"note: --data {tmp_path / 'rows.jsonl'}: 1 of 2 held-out ")
    assert cut[1].endswith(f"(1 conversation has none left and is not measured by val_loss: "
                           f"line {val[0] + 1})")
    capsys.readouterr()
    evaluate_loss(cfg, torch.nn.Embedding(len(theirs), len(theirs)), tok,
                  str(tmp_path / "rows.jsonl"))  # every row of the file, measured
    assert capsys.readouterr().err.endswith(
        f"(2 conversations have none left and are not measured by val_loss, the first line "
        f"{min(val[0], train[0]) + 1})\n")
