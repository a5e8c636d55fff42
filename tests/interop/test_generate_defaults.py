"""`attnlab generate DIR` decodes as DIR's generation_config.json says where no flag says
otherwise: the sampled text with a seed is the text of the same settings given as flags, a flag
given wins, do_sample false is greedy (and equals transformers' generate, which reads the same
file), one note on stderr says what came from the file and what it asks for that attnlab does
not do, and a bad value in the file is a one-line error naming the file and the key. A tiny
random GPT-2 with a byte-level BPE (``test_checkpoint.save_gpt2``)."""
import json
import shutil

import pytest
import torch

from attnlab.cli import main
from attnlab.interop.generation_config import read_sampling, resolve
from .conftest import transformers
from .test_checkpoint import CORPUS, save_gpt2

N = 12  # new tokens
EOS = 0  # <|endoftext|>, the tokenizer's one special token
# Qwen2.5-Instruct's sampling defaults
QWEN_INSTRUCT = {"do_sample": True, "temperature": 0.7, "top_p": 0.8, "top_k": 20,
                 "repetition_penalty": 1.05}


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A GPT-2 directory whose random model never says <|endoftext|> in N tokens."""
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    torch.manual_seed(4)
    return save_gpt2(tmp_path_factory.mktemp("gendefaults") / "base", extra_rows=0)


def _with(base, tmp_path, name, config):
    """A copy of ``base`` whose generation_config.json holds ``config`` (and the eos ids)."""
    d = tmp_path / name
    shutil.copytree(base, d)
    (d / "generation_config.json").write_text(json.dumps(
        {"bos_token_id": EOS, "eos_token_id": EOS, **config}), encoding="utf-8")
    return d


def _generate(capsys, d, *flags):
    prompt = [] if "--input-file" in flags else ["--prompt", "the cat"]
    assert main(["generate", str(d), *prompt, "--max-new-tokens", str(N), "--threads", "1",
                 *flags]) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err


@pytest.mark.slow
def test_the_files_sampling_defaults_sample_as_the_same_flags(base, tmp_path, capsys):
    d = _with(base, tmp_path, "instruct", QWEN_INSTRUCT)
    out, err = _generate(capsys, d, "--seed", "3")
    as_flags, flags_err = _generate(capsys, d, "--seed", "3", "--temperature", "0.7",
                                    "--top-k", "20", "--top-p", "0.8")
    plain = _with(base, tmp_path, "plain", {})  # no sampling key: attnlab's defaults
    attnlab_defaults, plain_err = _generate(capsys, plain, "--seed", "3")
    assert out == as_flags
    assert out != attnlab_defaults and plain_err == ""  # the file's settings changed the text
    assert err == (f"note: sampling with --temperature 0.7 --top-k 20 --top-p 0.8, from "
                   f"{d}/generation_config.json; a flag given wins; its repetition_penalty "
                   f"1.05 is not applied (attnlab generate has no such option), so the text is "
                   f"not what transformers' generate gives\n")
    # every sampling flag given: the file decides nothing; its penalty is still named
    assert flags_err == (f"note: {d}/generation_config.json's repetition_penalty 1.05 is "
                         f"not applied (attnlab generate has no such option), so the text is not "
                         f"what transformers' generate gives\n")


@pytest.mark.slow
def test_a_flag_given_wins_over_the_file_and_the_note_comes_once(base, tmp_path, capsys):
    d = _with(base, tmp_path, "sampling", {"do_sample": True, "temperature": 0.7, "top_k": 20})
    (tmp_path / "p.txt").write_text("the cat\na dog\n", encoding="utf-8")
    out, err = _generate(capsys, d, "--seed", "5", "--temperature", "1.3",
                         "--input-file", str(tmp_path / "p.txt"))
    as_flags, _ = _generate(capsys, d, "--seed", "5", "--temperature", "1.3", "--top-k", "20",
                            "--input-file", str(tmp_path / "p.txt"))
    assert out == as_flags and out.count("\n") == 2  # one line per prompt
    assert err == (f"note: sampling with --top-k 20, from {d}/generation_config.json; a flag "
                   f"given wins\n")


@pytest.mark.slow
def test_do_sample_false_is_greedy_as_transformers_generate_reads_the_file(base, tmp_path,
                                                                           capsys):
    d = _with(base, tmp_path, "greedy", {"do_sample": False, "max_new_tokens": 2048})
    out, err = _generate(capsys, d)
    model = transformers.AutoModelForCausalLM.from_pretrained(d).eval()
    tok = transformers.AutoTokenizer.from_pretrained(d)
    ids = tok("the cat", return_tensors="pt")["input_ids"]
    new = model.generate(ids, max_new_tokens=N, pad_token_id=EOS)[0, ids.shape[1]:].tolist()
    assert len(new) == N  # no eos: every token compared
    assert out == "the cat" + tok.decode(new, skip_special_tokens=True) + "\n"
    assert err == (f"note: greedy decoding, as {d}/generation_config.json says (do_sample "
                   f"false); --temperature, --top-k, --top-p, --seed or --no-greedy sample "
                   f"instead\n")
    sampled, _ = _generate(capsys, d, "--no-greedy", "--seed", "3")
    assert sampled != out
    # --seed alone seeds a sample too (it was ignored: the greedy text whatever the seed),
    # as --greedy --seed is refused for doing nothing
    seeded = [_generate(capsys, d, "--seed", seed) for seed in ("3", "3", "4")]
    assert seeded[0] == seeded[1] == (sampled, "") and seeded[2][0] != sampled


@pytest.mark.parametrize("config, message", [
    ({"do_sample": True, "temperature": 0},
     "temperature 0 is too small (at least 1e-06): logits / temperature would overflow "
     "float32; greedy decoding (--greedy, do_sample=False) takes the most likely token; give "
     "--temperature to override it"),
    ({"do_sample": True, "temperature": -1},
     "temperature must be > 0, got -1; give --temperature to override it"),
    ({"top_p": 1.5}, "top_p must be in (0, 1], got 1.5; give --top-p to override it"),
    ({"top_k": 2.5}, "top_k must be a positive integer, got 2.5; give --top-k to override it"),
    ({"do_sample": "yes"}, "do_sample must be true or false, got 'yes'"),
])
def test_a_bad_value_in_the_file_is_one_line_naming_file_and_key(tmp_path, capsys, config,
                                                                  message):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}), encoding="utf-8")
    (tmp_path / "generation_config.json").write_text(json.dumps(config), encoding="utf-8")
    assert main(["generate", str(tmp_path), "--prompt", "hi"]) == 2
    assert capsys.readouterr().err == (f"attnlab: error: {tmp_path}/generation_config.json: "
                                       f"{message}\n")


NONE = {"greedy": None, "temperature": None, "top_k": None, "top_p": None}


@pytest.mark.parametrize("given, config, taken", [
    ({}, {"do_sample": False, "temperature": 0.7}, {"greedy": True}),
    ({"greedy": False}, {"do_sample": False, "temperature": 0.7}, {"temperature": 0.7}),
    ({"top_k": 5}, {"do_sample": False, "temperature": 0.7}, {"temperature": 0.7}),
    ({"greedy": True}, {"do_sample": True, "temperature": 0.7}, {}),
    ({"temperature": 0.9}, {"temperature": 0.7, "top_p": 0.8}, {"top_p": 0.8}),
    ({}, {"top_k": 0}, {}),  # transformers' "no top-k": attnlab's default already
    ({}, {"eos_token_id": 2}, {}),  # no sampling key: attnlab's defaults, not transformers'
    ({"seed": 3}, {"do_sample": False, "top_p": 0.8}, {"top_p": 0.8}),  # a seed samples
])
def test_what_the_file_decides(tmp_path, given, config, taken):
    (tmp_path / "generation_config.json").write_text(json.dumps(config), encoding="utf-8")
    got, note = resolve({**NONE, **given}, read_sampling(tmp_path))
    assert got == taken
    assert (note is None) == (not taken)


def _run_from(d, tmp_path, capsys):
    """An lm run trained one step with --init ``d``."""
    (tmp_path / "text.txt").write_text("\n".join(CORPUS), encoding="utf-8")
    run = tmp_path / "run"
    assert main(["train", "lm", "--out", str(run), "--init", str(d), "--data",
                 str(tmp_path / "text.txt"), "--block-size", "16", "--batch-size", "4",
                 "--max-steps", "1", "--val-batches", "1", "--threads", "1"]) == 0
    capsys.readouterr()
    return run

@pytest.mark.slow
def test_a_run_from_init_names_the_flags_of_its_checkpoints_defaults(base, tmp_path, capsys):
    """A run decodes by attnlab's defaults; while its --init DIR is there, a note names the
    flags that decode as DIR's generation_config.json says, and the flags given silence it."""
    d = _with(base, tmp_path, "instruct", QWEN_INSTRUCT)
    run = _run_from(d, tmp_path, capsys)
    out, err = _generate(capsys, run, "--seed", "3")
    (d / "generation_config.json").rename(tmp_path / "away.json")
    assert _generate(capsys, run, "--seed", "3") == (out, "")  # the file changes nothing
    (tmp_path / "away.json").rename(d / "generation_config.json")
    assert err == (f"note: {run} decodes by attnlab's defaults, not by --init {d}'s "
                   f"generation_config.json; give --temperature 0.7 --top-k 20 --top-p 0.8 "
                   f"to decode as it says\n")
    assert _generate(capsys, run, "--greedy")[1] == ""


@pytest.mark.slow
def test_a_run_from_init_says_where_transformers_decodes_its_checkpoint_otherwise(
        base, tmp_path, capsys):
    """`generate RUN` says what `generate DIR` says of transformers' defaults: a Llama 3
    Instruct style file (do_sample, no top_k) is sampled among 50 tokens by transformers, a
    file with sampling values but no do_sample is decoded greedily. The run's note named only
    the file's flags (or nothing, for do_sample alone), as if they sampled as DIR samples."""
    d = _with(base, tmp_path, "llama", {"do_sample": True, "temperature": 0.6, "top_p": 0.9})
    run = _run_from(d, tmp_path, capsys)
    head = (f"note: {run} decodes by attnlab's defaults, not by --init {d}'s "
            f"generation_config.json; ")
    top_50 = ("with no top_k in it, transformers' generate samples among its default 50 most "
              "likely tokens and attnlab without a top-k: give --top-k 50 to sample as "
              "transformers does\n")
    greedy = ("with no do_sample in it, transformers' generate decodes greedily and attnlab "
              "samples: give --greedy to decode as transformers does\n")
    assert _generate(capsys, run, "--seed", "3")[1] == (
        head + "give --temperature 0.6 --top-p 0.9 to decode as it says; " + top_50)
    assert _generate(capsys, run, "--seed", "3", "--top-k", "50")[1] == (
        head + "give --temperature 0.6 --top-p 0.9 to decode as it says\n")
    (d / "generation_config.json").write_text(json.dumps({"do_sample": True}),
                                              encoding="utf-8")
    assert _generate(capsys, run, "--seed", "3")[1] == head + top_50
    (d / "generation_config.json").write_text(json.dumps({"temperature": 0.7, "top_p": 0.8}),
                                              encoding="utf-8")
    assert _generate(capsys, run)[1] == (
        head + "give --temperature 0.7 --top-p 0.8 to decode as it says; " + greedy)
    assert _generate(capsys, run, "--greedy")[1] == ""
