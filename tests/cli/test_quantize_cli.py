"""``--quantize int8`` of generate, translate and evaluate, and ``attnlab.load(run,
quantize="int8")``: the int8 model answers like the float one on a trained
run, its perplexity is within 1% of float32's, and the flag is refused, in one line naming it,
where it does not apply."""
from __future__ import annotations

import json
from unittest.mock import ANY

import pytest
import torch

import attnlab
from attnlab.cli import main

from ..reliability.conftest import TINY, TINY_MODEL, write_corpus

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A character lm trained until it has learnt its text (perplexity ~1.5), and a tiny
    translate run."""
    tmp = tmp_path_factory.mktemp("quantize")
    lm, translate = tmp / "lm", tmp / "translate"
    assert main(["train", "lm", "--data", str(write_corpus(tmp / "corpus.txt")), "--out", str(lm),
                 "--num-layers", "1", "--batch-size", "8", "--block-size", "16", "--val-batches",
                 "2", "--model-dim", "32", "--num-heads", "2", "--dim-feedforward", "64",
                 "--warmup", "5", "--threads", "1", "--max-steps", "300", "--lr", "3e-3"]) == 0
    assert main(["train", "translate", "--out", str(translate), *TINY["translate"].split(),
                 *TINY_MODEL.split(), "--max-steps", "5"]) == 0
    return {"lm": lm, "translate": translate}


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("command", ["generate", "translate", "evaluate"])
def test_help_lists_the_flag(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    assert "--quantize int8" in capsys.readouterr().out


def test_int8_perplexity_is_within_one_percent_of_float32(runs, capsys):
    code, out, _ = run_cli(capsys, "evaluate", runs["lm"])
    code8, out8, _ = run_cli(capsys, "evaluate", runs["lm"], "--quantize", "int8")
    fp32, int8 = json.loads(out)["val_perplexity"], json.loads(out8)["val_perplexity"]
    assert code == code8 == 0
    # the int8 metrics say they are int8: the float run's keys, and "quantize" before them
    assert json.loads(out8) == {"quantize": "int8", **json.loads(out), "val_loss": ANY,
                                "val_perplexity": int8}
    assert out8.startswith('{\n  "quantize": "int8",\n') and "quantize" not in out
    assert fp32 < 2.0  # the model has learnt its text, so the comparison means something
    assert abs(int8 / fp32 - 1) < 0.01


def test_int8_greedy_generation_writes_what_float32_writes(runs, capsys):
    argv = ["generate", runs["lm"], "--prompt", "the quick", "--greedy", "--max-new-tokens", "40"]
    code, out, _ = run_cli(capsys, *argv)
    code8, out8, _ = run_cli(capsys, *argv, "--quantize", "int8")
    assert code == code8 == 0
    assert out8.startswith("the quick") and out8 == out


def test_translate_and_its_evaluation_run_on_int8_weights(runs, capsys):
    code, out, _ = run_cli(capsys, "translate", runs["translate"], "342", "17", "--beam", "2",
                           "--quantize", "int8", "--json")
    assert code == 0
    assert [json.loads(line)["input"] for line in out.splitlines()] == ["342", "17"]
    code, out, _ = run_cli(capsys, "evaluate", runs["translate"], "--quantize", "int8")
    assert code == 0 and {"test_bleu", "test_chrf", "test_exact_match"} <= set(json.loads(out))
    assert json.loads(out)["quantize"] == "int8"


def test_int8_translations_of_a_file_are_those_of_one_call_per_text(runs, tmp_path,
                                                                     monkeypatch, capsys):
    """Dynamic int8 rounds each call's input by the range of the whole call, so in a batch one
    text's translation could depend on its neighbours: int8 translates one text at a time."""
    from attnlab.models import Seq2SeqTransformer

    texts = ["342", "17", "901", "seven hundred and seventy-seven", "4", "999"]
    alone = []
    for text in texts:
        code, out, _ = run_cli(capsys, "translate", runs["translate"], text, "--quantize", "int8")
        assert code == 0
        alone.append(out.rstrip("\n"))
    rows, generate = [], Seq2SeqTransformer.generate
    monkeypatch.setattr(Seq2SeqTransformer, "generate",
                        lambda self, src, *a, **k: rows.append(src.shape[0]) or generate(
                            self, src, *a, **k))
    path = tmp_path / "texts.txt"
    path.write_text("\n".join(texts) + "\n")
    code, out, _ = run_cli(capsys, "translate", runs["translate"], "--input-file", path,
                           "--quantize", "int8")
    assert code == 0 and out.split("\n")[:-1] == alone
    assert rows == [1] * len(texts)  # one text per call of the int8 model


def test_python_load_gives_the_int8_model(runs):
    model, _ = attnlab.load(runs["lm"], quantize="int8")
    assert isinstance(model.lm_head, torch.ao.nn.quantized.dynamic.Linear)
    float_model, _ = attnlab.load(runs["lm"])
    assert type(float_model.lm_head) is torch.nn.Linear


def test_other_tasks_and_other_kinds_are_refused_in_one_line(runs, reverse_run, capsys):
    code, out, err = run_cli(capsys, "evaluate", reverse_run, "--quantize", "int8")
    assert (code, out) == (2, "")
    assert err.strip() == (f"attnlab: error: --quantize is for lm and translate runs; "
                           f"{reverse_run} is a reverse run")
    code, _, err = run_cli(capsys, "generate", runs["lm"], "--prompt", "the", "--quantize", "int4")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "argument --quantize: invalid choice: 'int4'" in err
    with pytest.raises(ValueError, match="quantize is for lm and translate runs"):
        attnlab.load(reverse_run, quantize="int8")


def test_int8_says_on_stderr_where_it_will_be_slower(runs, capsys):
    """--help and README once promised faster decoding everywhere, yet a 64-wide translate run
    and lm generation were slower in int8 (benchmarks/RESULTS.md, "quantize_where"). Where the
    measured rule says int8 loses (a model narrower than int8 pays for, or several texts to
    translate, which int8 decodes one at a time), the command prints one note on stderr and
    still answers."""
    argv = ["generate", runs["lm"], "--prompt", "the quick", "--greedy", "--max-new-tokens", "5"]
    code, out, err = run_cli(capsys, *argv, "--quantize", "int8")
    assert code == 0 and out.startswith("the quick")
    assert err == ("note: --quantize int8 is likely slower than float32 here: this model is 32 "
                   "wide, and int8 decoding was faster only from 256 wide "
                   "(benchmarks/RESULTS.md, quantize_where)\n")
    assert run_cli(capsys, *argv)[2] == ""  # float32: no note
    code, out, err = run_cli(capsys, "translate", runs["translate"], "342", "17",
                             "--quantize", "int8")
    assert code == 0 and len(out.splitlines()) == 2
    assert [line for line in err.splitlines() if "int8" in line] == [
        "note: --quantize int8 is likely slower than float32 here: it translates the 2 texts "
        "one at a time, float32 in one batch (int8 was slower for several texts at every "
        "width measured: benchmarks/RESULTS.md, quantize_where)"]
    code, _, err = run_cli(capsys, "translate", runs["translate"], "342", "--quantize", "int8")
    assert code == 0 and "this model is 16 wide, and int8 decoding was faster only from 384" in err


def test_the_int8_rule_is_silent_where_int8_was_measured_faster(capsys):
    from attnlab.commands.quantize import int8_slower

    assert int8_slower("lm", 256) is None and int8_slower("lm", 1024) is None
    assert int8_slower("translate", 384, texts=1) is None
    assert int8_slower("translate", 1024, texts=2) is not None  # one text at a time
    with pytest.raises(SystemExit):
        main(["generate", "--help"])
    assert "from about 256 model dims" in " ".join(capsys.readouterr().out.split())
