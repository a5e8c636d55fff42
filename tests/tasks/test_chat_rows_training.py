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
    system = {"messages": [{"role": "system", "content": "be brief"},
                           {"role": "user", "content": "hi"},
                           {"role": "assistant", "content": "yo"}]}
    empty = json.loads(json.dumps(system))
    empty["messages"][0]["content"] = ""
    plain = {"prompt": "hi", "response": "yo"}
    for init, rows, refused in ((skips_system, [plain, system], True),
                                (skips_system, [plain, empty], False),
                                (keeps, [plain, system], False)):
        cfg = SimpleNamespace(instruction="chat", init=str(init))
        read = read_rows(_write(tmp_path / "rows.jsonl", rows))
        if refused:
            with pytest.raises(UsageError, match=r"line 2, message 1: .*1 row holds one"):
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
