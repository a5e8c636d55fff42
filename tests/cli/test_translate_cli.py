"""``attnlab translate DIR TEXT... [--beam N]``: output, no Lightning, and usage errors."""
import subprocess
import sys

import pytest
import torch

from attnlab.cli import main
from attnlab.runs import save_weights, write_yaml
from attnlab.tasks import get_task
from attnlab.tasks.translate.data import TranslationTokenizers
from attnlab.tasks.translate.runtime import build_model
from attnlab.tokenizers import BPETokenizer, WordTokenizer


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A translate run directory with an untrained model (the command, not the model, is
    under test): written the way `train translate` writes it, without training."""
    from attnlab.data.numbers import spell

    out = tmp_path_factory.mktemp("runs") / "translate"
    out.mkdir()
    numbers = range(0, 300, 7)
    tok = TranslationTokenizers(WordTokenizer.fit([spell(n, "en") for n in numbers]),
                                BPETokenizer.fit([spell(n, "de") for n in numbers], vocab_size=270))
    cfg = {**get_task("translate").defaults, "task": "translate", "seed": 0, "norm_first": False,
           "model_dim": 16, "num_heads": 2, "num_layers": 1, "dim_feedforward": 32,
           "src_vocab_size": tok.src.vocab_size, "tgt_vocab_size": tok.tgt.vocab_size,
           "max_target_len": 12, "max_len": 64, "test_size": 50}
    torch.manual_seed(0)
    save_weights(build_model(get_task("translate").typed(cfg, out)), out / "model.safetensors")
    tok.save(out / "tokenizer.json")
    write_yaml(out / "config.yaml", cfg)
    return out


@pytest.mark.slow
def test_prints_one_translation_per_text_in_order(run_dir, capsys):
    from attnlab.runs import read_yaml

    capsys.readouterr()
    assert main(["translate", str(run_dir), "seven", "one hundred and five", "--beam", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    task = get_task("translate")
    cfg = task.typed(read_yaml(run_dir / "config.yaml"), run_dir)
    expected = task.runtime().translate(task, run_dir, cfg, ["seven", "one hundred and five"],
                                        num_beams=3)
    assert lines == expected and len(lines) == 2


@pytest.mark.slow
def test_digits_are_spelled_before_translating(run_dir, capsys):
    capsys.readouterr()
    main(["translate", str(run_dir), "105", "one hundred and five"])
    a, b = capsys.readouterr().out.splitlines()
    assert a == b


@pytest.mark.slow
def test_translate_predict_and_evaluate_never_import_lightning(run_dir):
    d = str(run_dir)
    code = (f"import sys; from attnlab.cli import main; "
            f"rc = main(['translate', {d!r}, 'seven', '--beam', '2']) "
            f"+ main(['predict', {d!r}, '--input', 'seven']) + main(['evaluate', {d!r}]); "
            f"assert not [m for m in sys.modules if m.startswith('lightning')], 'lightning imported'; "
            f"sys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert '"test_exact_match"' in proc.stdout  # evaluate printed the metrics


@pytest.mark.slow
def test_missing_run_directory_exits_2_with_one_line_and_no_traceback(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "attnlab", "translate", str(tmp_path / "nope"), "seven"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert f"run directory not found: {tmp_path / 'nope'}" in proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("extra, needle", [
    (["seven", "--beam", "0"], "--beam must be a positive integer, got 0"),
    (["seven", " "], "TEXT number 2 is empty"),
    ([], "give the TEXTs to translate or --input-file FILE (one of the two)"),
])
def test_bad_arguments_exit_2(run_dir, capsys, extra, needle):
    capsys.readouterr()
    assert main(["translate", str(run_dir), *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err, err


def test_a_run_of_another_task_is_refused(tmp_path, capsys):
    other = tmp_path / "rev"
    other.mkdir()
    write_yaml(other / "config.yaml", {"task": "reverse"})
    (other / "model.safetensors").write_bytes(b"")
    capsys.readouterr()
    assert main(["translate", str(other), "seven"]) == 2
    err = capsys.readouterr().err
    assert "holds a 'reverse' run; this command needs one of: translate" in err


@pytest.mark.slow
def test_evaluate_on_a_missing_file_says_not_found(run_dir, tmp_path, capsys):
    # not "unknown file type '.txt'", which sent users looking at the suffix of a typo
    capsys.readouterr()
    assert main(["evaluate", str(run_dir), "--data", str(tmp_path / "nope.txt")]) == 2
    assert capsys.readouterr().err == f"attnlab: error: --data: file not found: {tmp_path / 'nope.txt'}\n"


@pytest.mark.slow
def test_a_text_longer_than_the_model_reads_is_a_usage_error(run_dir, capsys):
    capsys.readouterr()
    assert main(["translate", str(run_dir), "seven", " ".join(["one"] * 70)]) == 2
    err = capsys.readouterr().err
    assert "TEXT number 2 has 70 tokens; this model reads at most 64" in err


@pytest.mark.slow
@pytest.mark.parametrize("text, shown", [
    ("99999999999999999999999", "TEXT number 2 (99999999999999999999999)"),
    ("1000000", "TEXT number 2 (1000000)"),
    ("-5", "TEXT number 2 (-5)"),
    ("9" * 5000, "TEXT number 2 (99999999999999999999… (5000 characters))"),
])
def test_digits_outside_the_trained_numbers_are_refused(run_dir, capsys, text, shown):
    # 99999999999999999999999 was once answered (exit 0) with a German number of the wrong
    # size and only a note about unknown words
    capsys.readouterr()
    assert main(["translate", str(run_dir), "7", text]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == (
        f"attnlab: error: {shown} is outside the numbers this run was trained on: "
        f"0 to 999,999 (max_number 1000000 in config.yaml)\n")


@pytest.mark.slow
def test_the_largest_trained_number_is_translated(run_dir, capsys):
    capsys.readouterr()
    assert main(["translate", str(run_dir), "999999", "0"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2


@pytest.mark.slow
@pytest.mark.parametrize("command", [["plot", "attention"], ["view"]])
def test_the_attention_pictures_refuse_the_same_digits(run_dir, tmp_path, capsys, command):
    capsys.readouterr()
    out = tmp_path / ("a.png" if command[0] == "plot" else "a.html")
    assert main([*command, str(run_dir), "--input", "1000000", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--input (1000000) is outside the numbers this run was " \
        "trained on: 0 to 999,999" in err, err
    assert not out.exists()


@pytest.mark.slow
def test_a_length_penalty_for_greedy_decoding_is_refused(run_dir, capsys):
    """`translate --length-penalty F` of a greedy run (--beam 1, the run's setting) is refused
    (it was once taken and ignored); with --beam N > 1 it applies."""
    assert main(["translate", str(run_dir), "three", "--length-penalty", "0.5"]) == 2
    assert capsys.readouterr().err == (
        "attnlab: error: --length-penalty 0.5 is for beam search, and this translation is "
        "greedy (--beam 1, the run's setting); give --beam N > 1 with it, or drop it\n")
    assert main(["translate", str(run_dir), "three", "--length-penalty", "0.5", "--beam",
                 "1"]) == 2
    assert main(["translate", str(run_dir), "three", "--length-penalty", "0.5", "--beam",
                 "2"]) == 0
