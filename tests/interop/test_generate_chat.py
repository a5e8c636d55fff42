"""`attnlab generate DIR` on a Hugging Face directory: a prompt continued as transformers'
greedy `generate` continues it; `--chat` (`--system`) answered through the checkpoint's chat
template, stopping at its end-of-turn token and printing the reply alone; the one-line
refusals. A tiny random GPT-2 with a byte-level BPE and a ChatML-style template, written here."""
import json
import subprocess
import sys

import pytest

import torch  # noqa: E402
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402

from attnlab.cli import main  # noqa: E402
from attnlab.interop.chat import config_eos_ids, end_of_turn_id, joined_stops  # noqa: E402
from .conftest import transformers  # noqa: E402  (imported when a test first uses it)

CORPUS = ["the cat sat on the mat.", "a dog ran fast!", "hello world, hello there"] * 20
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
          "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
# a template that refuses a system message, as Gemma's does
NO_SYSTEM = ("{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not "
             "supported') }}{% endif %}" + CHATML)
# a template with a default system prompt, as Qwen2.5's: an empty system message replaces it
DEFAULT_SYSTEM = ("{% if messages[0]['role'] == 'system' %}<|im_start|>system\n"
                  "{{ messages[0]['content'] }}<|im_end|>\n{% else %}<|im_start|>system\nthe "
                  "cat sat<|im_end|>\n{% endif %}{% for m in messages %}{% if m['role'] != "
                  "'system' %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                  "{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
                  "{% endif %}")
N = 30  # new tokens at most


def _tokenizer(template=None):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(
        vocab_size=300, special_tokens=SPECIALS, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    hf = transformers.GPT2TokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>",
                                        eos_token="<|endoftext|>", unk_token="<|endoftext|>")
    hf.chat_template = template
    return hf


def _save(d, template):
    """A GPT-2 directory whose greedy replies end with <|im_end|> after a few tokens: its
    output row is twice that of a token the random model comes to after a few steps (the
    embeddings untied, so what the model reads is unchanged)."""
    torch.manual_seed(2)
    tok = _tokenizer(template)
    eot = tok.convert_tokens_to_ids("<|endoftext|>")
    hf = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=len(tok), n_positions=64, n_embd=32, n_layer=2, n_head=4,
        bos_token_id=eot, eos_token_id=eot, tie_word_embeddings=False))
    with torch.no_grad():
        row = hf.lm_head.weight
        row[tok.convert_tokens_to_ids("<|im_end|>")] = 2 * row[39]
    hf.save_pretrained(d)
    tok.save_pretrained(d)
    return d


def _save_metaspace(d):
    """A GPT-2 directory with a SentencePiece-style tokenizer (Llama 2's, Mistral's): a word's
    leading space is part of its token, and decoding drops the space that starts a text."""
    torch.manual_seed(0)
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first")
    tok.decoder = decoders.Metaspace(prepend_scheme="first")
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(
        vocab_size=120, special_tokens=["<unk>", "<s>", "</s>"], show_progress=False))
    hf = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>",
                                              eos_token="</s>", unk_token="<unk>")
    transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=len(hf), n_positions=64, n_embd=32, n_layer=2, n_head=4, bos_token_id=1,
        eos_token_id=2)).save_pretrained(d)
    hf.save_pretrained(d)
    return d


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hfgen")
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    return {"chat": _save(tmp / "chat", CHATML), "base": _save(tmp / "base", None),
            "no-system": _save(tmp / "no-system", NO_SYSTEM),
            "default-system": _save(tmp / "default-system", DEFAULT_SYSTEM),
            "metaspace": _save_metaspace(tmp / "metaspace")}


def _theirs(d):
    return (transformers.AutoModelForCausalLM.from_pretrained(d).eval(),
            transformers.AutoTokenizer.from_pretrained(d))


def _reference_reply(d, messages):
    """transformers' greedy reply to ``messages``: generate on apply_chat_template's ids,
    the new tokens up to the end-of-turn token decoded; and where that token came."""
    model, tok = _theirs(d)
    ids = tok.apply_chat_template(messages, add_generation_prompt=True, return_dict=False)
    end = tok.convert_tokens_to_ids("<|im_end|>")
    new = model.generate(torch.tensor([ids]), max_new_tokens=N, do_sample=False,
                         eos_token_id=[tok.eos_token_id, end],
                         pad_token_id=tok.eos_token_id)[0, len(ids):].tolist()
    at = new.index(end) if end in new else None
    return tok.decode(new[:at], skip_special_tokens=True), at


@pytest.mark.slow
def test_a_prompt_is_continued_as_transformers_greedy_generate_continues_it(dirs, capsys):
    d = dirs["base"]
    assert main(["generate", str(d), "--prompt", "the cat", "--greedy",
                 "--max-new-tokens", str(N), "--threads", "1"]) == 0
    model, tok = _theirs(d)
    ids = tok("the cat", return_tensors="pt")["input_ids"]
    out = model.generate(ids, max_new_tokens=N, do_sample=False, pad_token_id=tok.eos_token_id)
    new = out[0, ids.shape[1]:].tolist()
    assert len(new) == N  # the random model never says <|endoftext|>: all N tokens compared
    assert capsys.readouterr().out == "the cat" + tok.decode(new, skip_special_tokens=True) + "\n"
    assert main(["generate", str(d), "--prompt", ""]) == 2
    assert capsys.readouterr().err == ("attnlab: error: --prompt is empty; give some text to "
                                       "continue\n")


@pytest.mark.slow
def test_a_prompt_longer_than_the_checkpoint_reads_names_its_context_length(dirs, capsys):
    """The note named --block-size, a flag a Hugging Face directory does not have (it is
    its config.json's n_positions)."""
    d = dirs["base"]
    prompt = "the cat sat on the mat. " * 12
    n = len(_theirs(d)[1](prompt)["input_ids"])
    assert n > 64  # the directory's n_positions
    assert main(["generate", str(d), "--prompt", prompt, "--greedy", "--max-new-tokens", "2",
                 "--threads", "1"]) == 0
    assert capsys.readouterr().err == (f"note: --prompt has {n} tokens; the model reads its "
                                       f"last 63 ({d}'s context length, 64)\n")


@pytest.mark.slow
def test_a_continuation_keeps_its_leading_space_after_the_prompt(dirs, capsys):
    """Decoded alone, a SentencePiece continuation loses the space before its first word and
    is glued to the prompt ("the catcat"); printed, it reads as transformers decodes the
    whole output."""
    d = dirs["metaspace"]
    assert main(["generate", str(d), "--prompt", "the cat", "--greedy",
                 "--max-new-tokens", "8", "--threads", "1"]) == 0
    model, tok = _theirs(d)
    ids = tok("the cat", return_tensors="pt")["input_ids"]
    out = model.generate(ids, max_new_tokens=8, do_sample=False)
    whole = tok.decode(out[0], skip_special_tokens=True)
    assert whole.startswith("the cat ")  # the continuation's first word after a space
    assert capsys.readouterr().out == whole + "\n"


@pytest.mark.slow
def test_a_chat_reply_is_the_templated_reply_cut_at_the_end_of_turn_token(dirs, capsys):
    d = dirs["chat"]
    assert main(["generate", str(d), "--chat", "hello there", "--system", "be brief",
                 "--greedy", "--max-new-tokens", str(N), "--threads", "1"]) == 0
    printed = capsys.readouterr().out
    expected, at = _reference_reply(d, [{"role": "system", "content": "be brief"},
                                        {"role": "user", "content": "hello there"}])
    assert at is not None and 0 < at < N  # the reply ended at <|im_end|>, after some text
    assert printed == expected + "\n"
    assert "<|im_start|>" not in printed and "hello there" not in printed  # the reply alone


@pytest.mark.slow
def test_an_empty_system_message_replaces_the_templates_default_one(dirs, capsys):
    """--system '' was refused as empty, though an empty system message is how Hugging Face
    users keep a template's default system prompt (Qwen2.5's "You are Qwen...") out, and how
    rows trained with one were laid out: leaving --system out brings the default back."""
    from attnlab.interop.chat import chat_ids, conversation

    d = dirs["default-system"]
    empty = [{"role": "system", "content": ""}, {"role": "user", "content": "hello there"}]
    tok = transformers.AutoTokenizer.from_pretrained(d)
    theirs = tok.apply_chat_template(empty, add_generation_prompt=True, return_dict=False)
    assert tok.decode(theirs).startswith("<|im_start|>system\n<|im_end|>\n<|im_start|>user")
    assert theirs != tok.apply_chat_template(empty[1:], add_generation_prompt=True,
                                             return_dict=False)  # the default, "the cat sat"
    assert chat_ids(tok, conversation("hello there", ""), d) == theirs
    assert main(["generate", str(d), "--chat", "hello there", "--system", "", "--greedy",
                 "--max-new-tokens", str(N), "--threads", "1"]) == 0
    assert capsys.readouterr().out == _reference_reply(d, empty)[0] + "\n"


@pytest.mark.slow
def test_input_file_with_chat_answers_each_line_in_order(dirs, tmp_path, capsys):
    d = dirs["chat"]
    messages = ["hello there", "the cat sat", "a dog ran"]
    (tmp_path / "m.txt").write_text("\n".join(messages) + "\n", encoding="utf-8")
    assert main(["generate", str(d), "--input-file", str(tmp_path / "m.txt"), "--chat",
                 "--greedy", "--json", "--max-new-tokens", str(N), "--threads", "1"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    expected = [_reference_reply(d, [{"role": "user", "content": m}])[0] for m in messages]
    assert lines == [{"chat": m, "text": e} for m, e in zip(messages, expected)]


# templates in the layouts of real checkpoints, each with the token that ends a turn
LLAMA3 = ("{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}"
          "<|end_header_id|>\n\n{{ m['content'] | trim }}<|eot_id|>{% endfor %}"
          "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n"
          "{% endif %}")
GEMMA = ("{% for m in messages %}<start_of_turn>{{ 'model' if m['role'] == 'assistant' else "
         "m['role'] }}\n{{ m['content'] | trim }}<end_of_turn>\n{% endfor %}"
         "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}")
EOS_ENDS = "{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}{{ eos_token }}{% endfor %}"


@pytest.mark.parametrize("template, token", [
    (CHATML, "<|im_end|>"), (LLAMA3, "<|eot_id|>"), (GEMMA, "<end_of_turn>"),
    (EOS_ENDS, "<|endoftext|>")])
def test_the_end_of_turn_token_is_read_from_the_template(template, token):
    tok = _tokenizer(template)
    tok.add_tokens(["<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
                    "<start_of_turn>", "<end_of_turn>"], special_tokens=True)
    assert end_of_turn_id(tok) == tok.convert_tokens_to_ids(token)


@pytest.mark.slow
def test_the_stops_join_the_configs_eos_tokens_and_the_end_of_turn(tmp_path):
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [5, 7]}))
    tok = _tokenizer(CHATML)
    config = config_eos_ids(tmp_path)
    assert joined_stops(config, 0, end_of_turn_id(tok)) == [
        5, 7, 0, tok.convert_tokens_to_ids("<|im_end|>")]
    assert joined_stops(config, 5, None) == [5, 7]


@pytest.mark.slow
def test_a_run_from_a_checkpoint_stops_its_chat_at_the_checkpoints_eos_ids(dirs, tmp_path):
    """``train lm --init DIR`` keeps DIR's generation_config.json eos ids in the run's
    tokenizer.json, so ``generate RUN --chat`` (and the run's export) stops where ``generate
    DIR --chat`` does; the run once kept only the tokenizer's eos and the end-of-turn token."""
    import shutil

    from attnlab.interop.checkpoint import read_tokenizer
    from attnlab.interop.hf_tokenizer import HFTokenizer
    from attnlab.tasks.lm.instruct import ChatSession

    d = shutil.copytree(dirs["chat"], tmp_path / "chat")
    (d / "generation_config.json").write_text(json.dumps({"eos_token_id": [0, 39]}))
    read_tokenizer(d, task="lm").save(tmp_path / "tokenizer.json")  # as --init writes the run's
    run_tokenizer = HFTokenizer.load(tmp_path / "tokenizer.json")
    checkpoint = joined_stops(config_eos_ids(d), run_tokenizer.eos_id,
                              end_of_turn_id(transformers.AutoTokenizer.from_pretrained(d)))
    assert 39 in checkpoint
    assert ChatSession(run_tokenizer, tmp_path).stops == checkpoint


@pytest.mark.slow
def test_chat_on_a_directory_without_a_chat_template_is_one_line(dirs, capsys):
    d = dirs["base"]
    assert main(["generate", str(d), "--chat", "hi"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"attnlab: error: --chat: {d} has no chat template")
    assert len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_a_template_that_refuses_the_conversation_is_one_line_naming_the_directory(dirs, capsys):
    d = dirs["no-system"]
    assert main(["generate", str(d), "--chat", "hi", "--system", "be brief"]) == 2
    err = capsys.readouterr().err
    assert err == (f"attnlab: error: --chat: {d}: its chat template cannot render this "
                   f"conversation (System role not supported)\n")


@pytest.mark.slow
def test_chat_without_a_template_is_refused_before_torch_is_imported(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"eos_token": "</s>"}))
    code = ("import sys; from attnlab.cli import main; "
            f"rc = main(['generate', {str(tmp_path)!r}, '--chat', 'hi']); "
            "assert 'torch' not in sys.modules, 'torch imported'; sys.exit(rc)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"attnlab: error: --chat: {tmp_path} has no chat template (no chat_template in its "
        f"tokenizer_config.json, no chat_template.jinja or chat_template.json): a base model "
        f"continues text; give --prompt TEXT instead"]


def test_an_unsupported_family_names_its_model_type_and_the_supported_ones(tmp_path, capsys):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "t5"}))
    (tmp_path / "model.safetensors").write_bytes(b"")
    (tmp_path / "tokenizer.json").write_text("{}")
    assert main(["generate", str(tmp_path), "--prompt", "hi"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(tmp_path) in err
    assert "model_type 't5' is not supported" in err and "supported: gpt2" in err


@pytest.mark.parametrize("args, message", [
    (["--system", "be brief", "--prompt", "hi"],
     "--system is the system message of a chat: give it with --chat"),
    (["--chat", "hi", "--prompt", "hi"], "give --prompt TEXT (continue a text) or --chat TEXT"),
    (["--chat"], "give --chat TEXT or --input-file FILE (one of the two)"),
    (["--chat", " "], "--chat is empty"),
    (["--chat", "hi", "--system", " "], "--system is blank; give it text, or --system '' for "
                                        "an empty system turn"),
    (["--prompt", "hi", "--checkpoint", "last"], "has no training checkpoints"),
])
def test_chat_flag_errors_are_one_line(tmp_path, capsys, args, message):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    assert main(["generate", str(tmp_path), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


@pytest.mark.slow
def test_a_run_from_a_checkpoint_continues_a_prompt_to_its_eos_ids_and_exports_them(
        dirs, tmp_path, capsys):
    """``generate RUN --prompt`` stopped at the tokenizer's eos alone, past the eos ids of the
    checkpoint the run was trained from (Llama 3 lists three), and the export wrote that one
    id; now both stop where ``generate DIR`` and transformers' ``generate`` do."""
    import shutil

    d = shutil.copytree(dirs["base"], tmp_path / "base")
    model, tok = _theirs(d)
    ids = tok("the cat")["input_ids"]
    first = int(model(torch.tensor([ids])).logits[0, -1].argmax())
    (d / "generation_config.json").write_text(json.dumps({"eos_token_id": [first]}))
    text = tmp_path / "text.txt"
    text.write_text(" ".join(CORPUS))
    run = tmp_path / "run"
    assert main(["train", "lm", "--init", str(d), "--data", str(text), "--out", str(run),
                 "--max-steps", "1", "--lr", "1e-9", "--block-size", "16", "--batch-size", "2",
                 "--threads", "1"]) == 0
    capsys.readouterr()
    for where in (d, run):  # the directory, and the run of it: the same stop
        assert main(["generate", str(where), "--prompt", "the cat", "--greedy",
                     "--max-new-tokens", "8", "--threads", "1"]) == 0
        assert capsys.readouterr().out == "the cat\n", where
    assert main(["export", str(run), "--hf", str(tmp_path / "hf")]) == 0
    exported = json.loads((tmp_path / "hf" / "generation_config.json").read_text())
    assert exported["eos_token_id"] == [first, tok.eos_token_id]
