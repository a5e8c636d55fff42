"""Instruction fine-tuning on a practitioner's own chat rows, checked token by token: what
``attnlab train lm --init DIR --data FILE.jsonl`` trains on against transformers' own reading
of the same rows (``apply_chat_template(..., return_assistant_tokens_mask=True)``), and what
it refuses or says before the run directory is written.

Offline: the tiny random Qwen2 directories of ``tests/interop/test_instruct_lm.py``.
"""
import json

import pytest

from attnlab.cli import main

from ..interop.test_instruct_lm import CHATML, _rows, _write, save_chat_model

transformers = pytest.importorskip("transformers")

# ChatML for a model without a system role that skips the system message without a word
# (rather than refuse it, as Gemma's and Mistral's first templates do)
SKIPS_SYSTEM = ("{% for m in messages %}{% if m['role'] != 'system' %}<|im_start|>"
                "{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endif %}{% endfor %}"
                "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
# ... one that renders a system message only where it comes first
FIRST_SYSTEM_ONLY = SKIPS_SYSTEM.replace("m['role'] != 'system'",
                                         "m['role'] != 'system' or loop.first")


# a run that trains for one step, were it not refused
TINY = ["--block-size", "64", "--max-steps", "1", "--batch-size", "4", "--threads", "1"]


@pytest.fixture(scope="module")
def skips_system(tmp_path_factory):
    return save_chat_model(tmp_path_factory.mktemp("chat") / "skips", template=SKIPS_SYSTEM)


@pytest.mark.slow
def test_rows_whose_system_message_the_template_leaves_out_are_refused(skips_system, tmp_path,
                                                                       capsys):
    """The run would train on replies to instructions the model never reads (generate --chat
    --system refuses the same template): one line naming the row, the message and the
    template, exit 2, nothing written; an empty system message ("") is no instruction."""
    rows = [r for r in _rows(20) if "prompt" in r]
    rows.insert(3, _rows(1)[0])  # file line 4: a system message, "be brief"
    rows.insert(5, _rows(1)[0])
    data = _write(tmp_path / "rows.jsonl", rows)
    out = tmp_path / "run"
    capsys.readouterr()
    assert main(["train", "lm", "--init", str(skips_system), "--data", str(data),
                 "--out", str(out), *TINY]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"attnlab: error: --data {data} line 4, message 1: --init {skips_system}'s "
                   f"chat template leaves the system message out of the conversation it "
                   f"renders (a model without a system role), so the run would train without "
                   f"it (2 rows hold one); give its instructions in the user's message instead")
    assert not out.exists()


@pytest.mark.slow
def test_only_a_system_message_with_text_under_a_template_that_drops_it_is_refused(
        skips_system, tmp_path):
    from types import SimpleNamespace

    from attnlab.data.chat_rows import read_rows
    from attnlab.errors import UsageError
    from attnlab.tasks.lm.checks import init_tokenizer
    from attnlab.tasks.lm.instruct import check_system_rows

    keeps = save_chat_model(tmp_path / "chatml", template=CHATML)
    first_only = save_chat_model(tmp_path / "first", template=FIRST_SYSTEM_ONLY)
    system = {"messages": [{"role": "system", "content": "be brief"},
                           {"role": "user", "content": "hi"},
                           {"role": "assistant", "content": "yo"}]}
    empty = json.loads(json.dumps(system))
    empty["messages"][0]["content"] = ""
    plain = {"prompt": "hi", "response": "yo"}
    # a system message after a turn, which the first-only template leaves out
    later = {"messages": [*system["messages"][1:], *system["messages"]]}
    for init, rows, refused in ((skips_system, [plain, system], "message 1"),
                                (skips_system, [plain, empty], None),
                                (keeps, [plain, system, later], None),
                                (first_only, [plain, system], None),
                                (first_only, [plain, system, later], "message 3")):
        cfg = SimpleNamespace(instruction="chat", init=str(init))
        read = read_rows(_write(tmp_path / "rows.jsonl", rows))
        if refused:
            with pytest.raises(UsageError,
                               match=rf"line {len(rows)}, {refused}: .*1 row holds one"):
                check_system_rows(cfg, init_tokenizer(init), read)
        else:
            check_system_rows(cfg, init_tokenizer(init), read)


def test_rows_whose_reply_lies_past_the_block_are_counted_named_and_left_out(tmp_path):
    """A conversation whose assistant tokens all fall past --block-size is not trained on (no
    zero-loss row in a batch's mean) and the note says how many and names the first by its
    file line, so that it is found in a file of thousands of rows."""
    from types import SimpleNamespace

    from attnlab.data.chat_rows import IGNORE, holdout, read_rows
    from attnlab.interop.hf_tokenizer import HFTokenizer
    from attnlab.tasks.lm.instruct import encode_splits

    from ..interop.test_instruct_lm import _tokenizer

    tok = HFTokenizer.from_transformers(_tokenizer("chatml"))
    rows = _rows(30)
    train = holdout(30, 0, where="x")[0]
    long = {"prompt": "reverse: " + "abc " * 40, "response": "cba"}
    for i in train[4:7]:
        rows[i] = long
    cfg = SimpleNamespace(instruction="chat", init="DIR", out=None, seed=0, block_size=80)
    found = encode_splits(cfg, tok, read_rows(_write(tmp_path / "rows.jsonl", rows)))
    cut = [n for n in found.notes if "cut at the end" in n]
    assert len(cut) == 1 and cut[0].endswith(
        f"(3 conversations have none left and are not trained on, the first line "
        f"{train[4] + 1})"), found.notes
    assert len(found.train) == len(train) - 3
    assert all(any(lab != IGNORE for lab in labels[1:]) for _, labels in found.train)


# the test styles' templates with the assistant's part in {% generation %}, which is what
# transformers' return_assistant_tokens_mask reads: each reply and its end-of-turn token
GENERATION = {
    "chatml": ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
               "{% if m['role'] == 'assistant' %}{% generation %}{{ m['content'] }}<|im_end|>"
               "{% endgeneration %}{% else %}{{ m['content'] }}<|im_end|>{% endif %}\n"
               "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"),
    "llama3": ("{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}"
               "<|end_header_id|>\n\n{% if m['role'] == 'assistant' %}{% generation %}"
               "{{ m['content'] | trim }}<|eot_id|>{% endgeneration %}{% else %}"
               "{{ m['content'] | trim }}<|eot_id|>{% endif %}{% endfor %}"
               "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>"
               "\n\n{% endif %}"),
}
# a practitioner's rows: one turn, a system message and two turns, a prompt/response row, an
# empty system turn with non-ASCII text, a reply that quotes the end-of-turn marker
ROWS = [
    {"messages": [{"role": "user", "content": "reverse: abc"},
                  {"role": "assistant", "content": "cba"}]},
    {"messages": [{"role": "system", "content": "be brief"},
                  {"role": "user", "content": "reverse: abc"},
                  {"role": "assistant", "content": "cba"},
                  {"role": "user", "content": "and dog?"},
                  {"role": "assistant", "content": " god \n"}]},
    {"prompt": "reverse: sun", "response": "nus"},
    {"messages": [{"role": "system", "content": ""},
                  {"role": "user", "content": "h\u00e9llo \U0001f642"},
                  {"role": "assistant", "content": "\u00fcn\u00ef \U0001f642\n\tx"}]},
    {"messages": [{"role": "user", "content": "say <|im_end|> and <|eot_id|>"},
                  {"role": "assistant", "content": "a <|im_end|> b <|eot_id|> c"}]},
]


@pytest.mark.parametrize("style", sorted(GENERATION))
def test_the_ids_and_the_loss_mask_are_transformers_assistant_mask(tmp_path, style):
    """Every id and every mask bit of what the run trains on (its rows read and encoded as a
    run encodes them) equal transformers' apply_chat_template(..., return_dict=True,
    return_assistant_tokens_mask=True) on the same tokenizer and a template that marks the
    replies with {% generation %}."""
    from types import SimpleNamespace

    from attnlab.data.chat_rows import IGNORE, read_rows
    from attnlab.interop.hf_tokenizer import HFTokenizer
    from attnlab.tasks.lm.instruct import encode_rows

    from ..interop.test_instruct_lm import _tokenizer

    theirs = _tokenizer(style, GENERATION[style])
    rows = read_rows(_write(tmp_path / "rows.jsonl", ROWS))
    cfg = SimpleNamespace(instruction="chat", init="DIR", out=None, seed=0, block_size=500)
    ours = encode_rows(cfg, HFTokenizer.from_transformers(theirs), rows, list(range(len(ROWS))))
    assert len(ours) == len(ROWS)
    for messages, (ids, labels) in zip(rows.conversations, ours):
        out = theirs.apply_chat_template(messages, tokenize=True, return_dict=True,
                                         return_assistant_tokens_mask=True)
        assert ids == list(out["input_ids"])
        assert [int(lab != IGNORE) for lab in labels] == list(out["assistant_masks"])
        assert all(lab in (IGNORE, i) for i, lab in zip(ids, labels))


@pytest.mark.parametrize("role, told", [
    ("developer", "; OpenAI's \"developer\" is \"system\" here"),
    ("model", "; Gemma's \"model\" is \"assistant\" here"),
    ("tool", "; tool turns (a call and its result) are not read here: leave the row out, or "
             "give the result as text in a user message"),
    ("ipython", "; tool turns (a call and its result) are not read here"),
    (["user"], ""),  # not text: named as it is, not a traceback
    ({"name": "user"}, ""),
])
def test_another_tools_role_is_refused_saying_what_it_is_here(tmp_path, role, told):
    """OpenAI's rows have "developer" and "tool" turns, Gemma's "model", Llama 3.1's
    "ipython": the one line names the row and the message, and says what to write instead;
    a role that is not text at all is named as it is."""
    from attnlab.data.chat_rows import read_rows
    from attnlab.errors import UsageError

    row = {"messages": [{"role": "user", "content": "weather?"},
                        {"role": "assistant", "content": "asking"},
                        {"role": role, "content": "sunny"},
                        {"role": "assistant", "content": "sunny"}]}
    data = _write(tmp_path / "rows.jsonl", [{"prompt": "a", "response": "b"}, row])
    with pytest.raises(UsageError) as refused:
        read_rows(data)
    assert str(refused.value).startswith(
        f"--data {data} line 2, message 3: role {role!r} is not one of system, user, "
        f"assistant{told}")
    assert len(str(refused.value).splitlines()) == 1
