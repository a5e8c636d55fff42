"""``attnlab generate DIR --chat TEXT --system TEXT`` with a chat template that has no place
for a system message and skips it without a word (a template that renders the user's and the
assistant's turns only): one line naming --system (after --chat:, exit 2), not a reply to a conversation without the
instructions given. A template that keeps the system message (ChatML), folds it into the
user's turn (Mistral v0.3's) or refuses it (Mistral's first: the template's own error) is read
as before."""
import pytest

from attnlab.errors import UsageError
from attnlab.interop.chat import chat_ids, conversation

from .test_generate_chat import CHATML, NO_SYSTEM, _tokenizer

# only the user's and the assistant's turns, anything else skipped
SKIPS_SYSTEM = ("{% for m in messages %}{% if m['role'] == 'user' %}[INST] {{ m['content'] }} "
                "[/INST]{% elif m['role'] == 'assistant' %}{{ m['content'] }}{{ eos_token }}"
                "{% endif %}{% endfor %}")
# Mistral v0.3's way: the system message put before the last user message
FOLDS_SYSTEM = ("{% if messages[0]['role'] == 'system' %}{% set system = messages[0]['content'] %}"
                "{% set rest = messages[1:] %}{% else %}{% set rest = messages %}{% endif %}"
                "{% for m in rest %}{% if m['role'] == 'user' %}[INST] {% if loop.last and "
                "system is defined %}{{ system }}\n\n{% endif %}{{ m['content'] }} [/INST]"
                "{% else %}{{ m['content'] }}{{ eos_token }}{% endif %}{% endfor %}")


def test_a_template_that_skips_the_system_message_is_refused_naming_system():
    tok = _tokenizer(SKIPS_SYSTEM)
    assert chat_ids(tok, conversation("hi"), "mistral-dir")  # no system: as before
    refusal = r"^--system: the chat template of mistral-dir leaves the system message out"
    with pytest.raises(UsageError, match=refusal):
        chat_ids(tok, conversation("hi", system="answer in French"), "mistral-dir")
    # the system's words in the message itself: still refused, not read as kept
    with pytest.raises(UsageError, match=refusal):
        chat_ids(tok, conversation("answer in French: hi", system="answer in French"),
                 "mistral-dir")


@pytest.mark.parametrize("template", [CHATML, FOLDS_SYSTEM])
def test_a_template_that_keeps_the_system_message_renders_it(template):
    tok = _tokenizer(template)
    ids = chat_ids(tok, conversation("hi", system="answer in French"), "dir")
    assert "answer in French" in tok.decode(ids)


def test_a_template_that_refuses_a_system_message_says_its_own_error():
    with pytest.raises(UsageError, match="cannot render this conversation"):
        chat_ids(_tokenizer(NO_SYSTEM), conversation("hi", system="be brief"), "dir")


def test_an_empty_system_message_is_not_refused():
    assert chat_ids(_tokenizer(SKIPS_SYSTEM), conversation("hi", system=""), "dir")


@pytest.mark.slow
def test_generate_refuses_system_before_reading_the_model_naming_the_template(
        tmp_path, monkeypatch, capsys):
    """One line naming --system and the directory, also with --input-file (the template's
    fault, no line's), and before the model is read."""
    from attnlab.cli import main
    from attnlab.commands import hf_generate

    from .conftest import transformers

    d = tmp_path / "mistral-dir"
    _tokenizer(SKIPS_SYSTEM).save_pretrained(d)
    transformers.GPT2Config(n_embd=8, n_layer=1, n_head=2).save_pretrained(d)
    (tmp_path / "msgs.txt").write_text("hi\n")

    def read(*args, **kwargs):
        raise AssertionError("the model was read")

    monkeypatch.setattr(hf_generate, "_load", read)
    assert main(["generate", str(d), "--input-file", str(tmp_path / "msgs.txt"), "--chat",
                 "--system", "answer in French"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"attnlab: error: --system: the chat template of {d} leaves")
    assert len(err.strip().splitlines()) == 1


def test_a_runs_template_that_skips_the_system_message_is_refused_from_its_tokenizer(tmp_path):
    """A run trained from such a checkpoint keeps its template in tokenizer.json: --system is
    refused from that file, before the run's model is read."""
    from attnlab.commands.generate import _check_run_chat
    from attnlab.interop.hf_tokenizer import HFTokenizer

    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("task: lm\n")
    HFTokenizer.from_transformers(_tokenizer(SKIPS_SYSTEM)).save(run / "tokenizer.json")
    _check_run_chat(run, None)  # no --system: nothing to refuse
    with pytest.raises(UsageError, match=rf"^--system: the chat template of {run} leaves"):
        _check_run_chat(run, "answer in French")
