"""`attnlab prepare` and `attnlab generate` from the command line."""
import subprocess
import sys

import pytest
import torch

import attnlab
from attnlab.cli import main
from attnlab.tasks.lm.continuation import StopStreamer
from attnlab.tokenizers import BPETokenizer, CharTokenizer

TEXT = "hello world. " * 200


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gen")
    (tmp / "t.txt").write_text(TEXT, encoding="utf-8")
    assert main(["prepare", str(tmp / "t.txt"), "--out", str(tmp / "data")]) == 0
    assert main(["train", "lm", "--data", str(tmp / "data"), "--out", str(tmp / "run"),
                 "--max-steps", "40", "--model-dim", "32", "--num-heads", "2", "--num-layers", "1",
                 "--dim-feedforward", "64", "--block-size", "16", "--batch-size", "16",
                 "--lr", "1e-2", "--warmup", "5", "--val-batches", "2", "--threads", "1"]) == 0
    return tmp / "run"


def test_prepare_prints_a_summary(tmp_path, capsys):
    (tmp_path / "a.txt").write_text(TEXT, encoding="utf-8")
    assert main(["prepare", str(tmp_path / "a.txt"), "--out", str(tmp_path / "d"),
                 "--tokenizer", "bpe", "--vocab-size", "270"]) == 0
    out = capsys.readouterr().out
    assert "train" in out and "bpe vocabulary of" in out
    assert (tmp_path / "d" / "meta.json").is_file()


@pytest.mark.parametrize("out", ["", "  "])
def test_prepare_an_empty_out_is_refused_not_read_as_the_current_directory(out, tmp_path,
                                                                           monkeypatch, capsys):
    # `--out ""` (an unset shell variable) was Path(""): the corpus was written into the
    # current directory, where it was empty
    (tmp_path / "texts").mkdir()
    (tmp_path / "texts" / "a.txt").write_text(TEXT, encoding="utf-8")
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    assert main(["prepare", str(tmp_path / "texts" / "a.txt"), "--out", out]) == 2
    assert capsys.readouterr().err.strip() == "attnlab: error: --out is empty; name a directory"
    assert list((tmp_path / "here").iterdir()) == []


def test_prepare_refuses_a_text_column_that_no_input_has(tmp_path, capsys):
    # text files are read whole: --text-column body did nothing, unsaid
    (tmp_path / "a.txt").write_text(TEXT, encoding="utf-8")
    assert main(["prepare", str(tmp_path / "a.txt"), "--out", str(tmp_path / "d"),
                 "--text-column", "body"]) == 2
    assert capsys.readouterr().err.strip() == (
        "attnlab: error: --text-column body: the column of a table (a .csv, .tsv, .jsonl or "
        ".parquet file, a datasets directory), but every input is a text file, read whole; "
        "drop it")
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("data, message", [
    (("café " * 400).encode("latin-1"), "is not UTF-8 text (invalid continuation byte at byte 3)"),
    (("hello world " * 100).encode("utf-16-le"), "holds a NUL byte at byte 1:"),
])
def test_train_lm_refuses_a_text_that_is_not_utf8_before_the_run_starts(tmp_path, capsys,
                                                                        data, message):
    """A Windows file (Latin-1, or UTF-16 without its mark, which would train on NULs) is
    refused in one line naming --data, before anything is prepared or written."""
    (tmp_path / "notes.txt").write_bytes(data)
    assert main(["train", "lm", "--data", str(tmp_path / "notes.txt"), "--out",
                 str(tmp_path / "run"), "--max-steps", "1", "--block-size", "8"]) == 2
    out, err = capsys.readouterr()
    assert "preparing" not in out and not (tmp_path / "run").exists()
    assert err.strip().count("\n") == 0 and f"--data {tmp_path / 'notes.txt'} {message}" in err


def test_train_lm_refuses_a_text_it_may_not_read_in_one_line(tmp_path, capsys, monkeypatch):
    """A --data file without read permission (another user's, chmod 600) was a traceback from
    the check of its first bytes; it is one line naming --data and why, and nothing is
    written. (Permission is simulated: the tests may run as root, who reads any file.)"""
    import builtins

    from attnlab.tasks.lm import checks

    text = tmp_path / "notes.txt"
    text.write_text(TEXT * 20, encoding="utf-8")

    def refused(path, *args, **kwargs):
        if str(path) == str(text):
            raise PermissionError(13, "Permission denied", str(path))
        return builtins.open(path, *args, **kwargs)

    monkeypatch.setattr(checks, "open", refused, raising=False)
    assert main(["train", "lm", "--data", str(text), "--out", str(tmp_path / "run"),
                 "--max-steps", "1", "--block-size", "8"]) == 2
    assert capsys.readouterr().err == (f"attnlab: error: --data {text}: cannot read the file "
                                       f"(Permission denied)\n")
    assert not (tmp_path / "run").exists()


def test_train_lm_on_a_folder_of_texts_says_to_prepare_them_elsewhere(tmp_path, capsys):
    """`prepare FILE... --out FOLDER` would be refused (the folder holds the user's files), so
    the advice names another --out; an empty folder may still be the corpus' --out."""
    (tmp_path / "texts").mkdir()
    (tmp_path / "texts" / "a.txt").write_text(TEXT, encoding="utf-8")
    (tmp_path / "empty").mkdir()
    for folder, advice in (("texts", f"prepare {tmp_path / 'texts'}/FILE... --out CORPUS`, "
                                     f"then give --data CORPUS"),
                           ("empty", f"prepare FILE... --out {tmp_path / 'empty'}`")):
        assert main(["train", "lm", "--data", str(tmp_path / folder), "--out",
                     str(tmp_path / "run"), "--max-steps", "1"]) == 2
        assert advice in capsys.readouterr().err and not (tmp_path / "run").exists()


@pytest.mark.slow
def test_greedy_generation_prints_the_models_continuation(run, capsys):
    assert main(["generate", str(run), "--prompt", "hello", "--max-new-tokens", "12", "--greedy"]) == 0
    printed = capsys.readouterr().out
    model, tok = attnlab.load(run)
    ids = torch.tensor([tok.encode("hello")])
    ids = torch.cat([ids, *model.stream(ids, 12, slide=True)], 1)
    assert printed == tok.decode(ids[0].tolist()) + "\n"


@pytest.mark.slow
def test_generation_beyond_the_context_and_seeded_sampling(run, capsys):
    args = ["generate", str(run), "--prompt", "hel", "--max-new-tokens", "40", "--seed", "3",
            "--temperature", "0.8", "--top-k", "5", "--top-p", "0.9"]
    assert main(args) == 0 and main(args) == 0
    first, second = capsys.readouterr().out.splitlines()
    assert first == second and len(first) == 3 + 40  # 40 characters past a 16-token context


@pytest.mark.slow
def test_stop_string_ends_the_output_before_it(run, capsys):
    assert main(["generate", str(run), "--prompt", "hello", "--greedy", "--max-new-tokens", "30",
                 "--stop", "wor"]) == 0
    printed = capsys.readouterr().out
    model, tok = attnlab.load(run)
    new = model.stream(torch.tensor([tok.encode("hello")]), 30, slide=True)  # past the context
    full = tok.decode(torch.cat(list(new), 1)[0].tolist())
    assert "wor" in full  # the model has learned the text, so the stop string comes up
    assert printed == "hello" + full[: full.index("wor")] + "\n"


@pytest.mark.slow
def test_a_stop_string_begun_by_the_prompt_ends_the_output_where_it_is_completed(run, capsys):
    """"hello wor" --stop "rld": the stop string appears once the model writes "ld"; the
    output ran on to the next "rld" instead, as if the prompt's "r" were not there."""
    model, tok = attnlab.load(run)
    new = model.stream(torch.tensor([tok.encode("hello wor")]), 30, slide=True)
    full = tok.decode(torch.cat(list(new), 1)[0].tolist())
    assert full.startswith("ld") and "wor" in full  # the model has learnt the text
    for stop in ("rld", "world"):  # begun in the prompt's last token, or tokens before it
        assert main(["generate", str(run), "--prompt", "hello wor", "--greedy",
                     "--max-new-tokens", "30", "--stop", stop]) == 0
        assert capsys.readouterr().out == "hello wor\n"
    # a stop string the prompt holds whole is not one the output reached
    assert main(["generate", str(run), "--prompt", "hello wor", "--greedy",
                 "--max-new-tokens", "30", "--stop", "wor"]) == 0
    assert capsys.readouterr().out == "hello wor" + full[:full.index("wor")] + "\n"


def _streamed(streamer, ids):
    """What ``streamer`` prints for each of ``ids``, up to the one that stops it."""
    pieces = []
    for i in ids:
        pieces.append(streamer.add(i))
        if streamer.stopped:
            break
    return pieces


def test_streamer_holds_back_possible_stop_prefixes_and_partial_characters():
    tok = CharTokenizer.fit(["abcdef"])
    s = StopStreamer(tok, ["cd"])
    pieces = _streamed(s, tok.encode("abcdef"))
    assert pieces == ["", "a", "b", ""] and s.stopped  # "c" waited: it could start "cd"
    bpe = BPETokenizer.fit(["x"], vocab_size=260)
    s = StopStreamer(bpe, [])
    ids = bpe.encode("é!")  # é is two bytes: its first byte alone is not printable yet
    assert [s.add(i) for i in ids] == ["", "é", "!"]


def test_a_stop_string_typed_decomposed_stops_an_nfc_tokenizers_text():
    # the tokenizer decodes "café" composed (NFC); --stop "é" typed as e + U+0301 was never
    # found, and generation ran past it
    tok = CharTokenizer.fit(["le café est bon"])
    s = StopStreamer(tok, ["e\u0301"])
    assert "".join(_streamed(s, tok.encode("le café est bon"))) == "le caf" and s.stopped


def test_a_stop_string_longer_than_the_prompt_that_begins_it_stops():
    """`generate --prompt "xab" --stop "ab cd"`: the prompt's text kept to join the new text
    was cut from a negative place (3 - 4), so only its last character was kept, "ab cd" never
    appeared, and generation printed " cd" and ran on."""
    tok = CharTokenizer.fit(["xab cd ef"])
    s = StopStreamer(tok, ["ab cd"], before="xab")
    assert "".join(_streamed(s, tok.encode(" cd ef"))) == "" and s.stopped


@pytest.mark.slow
@pytest.mark.parametrize("args, message", [
    (["--prompt", ""], "--prompt is empty"),
    (["--prompt", "hi", "--temperature", "0"], "--temperature"),
    (["--prompt", "hi", "--top-k", "0"], "--top-k"),
    (["--prompt", "hi", "--stop", ""], "--stop"),
    (["--chat", "hi"], "has no chat template (its tokenizer.json has none"),
])
def test_generate_errors(run, args, message, capsys):
    assert main(["generate", str(run), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


@pytest.mark.slow
def test_generate_runs_without_lightning_and_fails_cleanly(run, tmp_path):
    code = ("import sys; from attnlab.cli import main; "
            f"rc = main(['generate', {str(run)!r}, '--prompt', 'he', '--max-new-tokens', '5']); "
            "assert 'lightning' not in sys.modules, 'lightning imported'; sys.exit(rc)")
    ok = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("he") and ok.stderr == ""
    bad = subprocess.run([sys.executable, "-m", "attnlab", "generate", str(tmp_path), "--prompt", "x"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1 and str(tmp_path) in bad.stderr
    missing = subprocess.run([sys.executable, "-m", "attnlab", "prepare", str(tmp_path / "no.txt"),
                              "--out", str(tmp_path / "d")], capture_output=True, text=True)
    assert missing.returncode == 2 and missing.stderr.strip() == f"attnlab: error: file not found: {tmp_path / 'no.txt'}"


@pytest.mark.parametrize("flags, named", [
    (["--top-k", "5"], "--top-k 5 would do nothing: drop it"),
    (["--temperature", "0.7", "--seed", "3"], "--temperature 0.7, --seed 3 would do nothing: "
                                              "drop them"),
])
def test_greedy_refuses_the_sampling_options_it_would_ignore(tmp_path, capsys, flags, named):
    """`generate --greedy` with --temperature, --top-k, --top-p or --seed would ignore them
    without a word: refused before the run is read."""
    assert main(["generate", str(tmp_path / "nope"), "--prompt", "x", "--greedy", *flags]) == 2
    assert capsys.readouterr().err == (f"attnlab: error: --greedy takes the most likely token, "
                                       f"so {named}, or drop --greedy to sample\n")


@pytest.mark.parametrize("flags", [
    ["--prompt", "un caf\udce9 au lait"],
    ["--chat", "un caf\udce9 au lait"],
    ["--chat", "hi", "--system", "un caf\udce9 au lait"],
    ["--prompt", "hi", "--stop", "un caf\udce9 au lait"],
])
def test_generate_refuses_an_argument_that_is_not_utf8_naming_its_byte(tmp_path, capsys, flags):
    """A Latin-1 shell passes "café" as the byte 0xe9, which Python hands over as U+DCE9: a bpe
    or Hugging Face tokenizer failed with a traceback (TypeError: TextInputSequence must be
    str), a char or word run read it as unk and printed the prompt broken. Now one line names
    the flag and the byte, before the run is read."""
    assert main(["generate", str(tmp_path / "nope"), *flags]) == 2
    flag = flags[-2]
    assert capsys.readouterr().err == (
        f"attnlab: error: {flag} is not UTF-8 text (invalid continuation byte at byte 6); the "
        f"shell passed it in another encoding: give UTF-8 text\n")


@pytest.mark.slow
def test_generate_names_prompt_characters_a_bpe_models_text_never_had(tmp_path, capsys):
    """A byte-level BPE model trained on English, prompted in Greek, continued without a word:
    it spells the Greek in bytes whose embeddings training never touched (a char model's run
    says so of the same prompt). Now one note names them; an English prompt gets none."""
    (tmp_path / "t.txt").write_text(TEXT, encoding="utf-8")
    run = tmp_path / "run"
    assert main(["train", "lm", "--data", str(tmp_path / "t.txt"), "--tokenizer", "bpe",
                 "--vocab-size", "270", "--out", str(run), "--max-steps", "2", "--model-dim", "16",
                 "--num-heads", "2", "--num-layers", "1", "--block-size", "32",
                 "--threads", "1"]) == 0
    capsys.readouterr()
    said = {}
    for prompt in ("hello world", "γεια world"):
        assert main(["generate", str(run), "--prompt", prompt, "--max-new-tokens", "3",
                     "--greedy"]) == 0
        said[prompt] = capsys.readouterr().err
    assert said["hello world"] == ""
    assert said["γεια world"] == (
        "note: --prompt holds characters absent from the text the bpe tokenizer was fit on "
        "(spelt in bytes the model may never have learnt): 'γ', 'ε', 'ι', 'α'\n")


@pytest.mark.parametrize("argv, flag", [
    (["predict", "RUN", "--input", "un caf\udce9 au lait"], "--input"),
    (["plot", "attention", "RUN", "--input", "un caf\udce9 au lait", "--out", "a.png"],
     "--input"),
    (["view", "RUN", "--input", "un caf\udce9 au lait"], "--input"),
    (["translate", "RUN", "hello", "un caf\udce9 au lait"], "TEXT number 2"),
])
def test_an_input_that_is_not_utf8_is_refused_naming_its_byte(tmp_path, capsys, argv, flag):
    """`predict --input` (and plot, view, translate's TEXT) in a Latin-1 shell's bytes: a bpe
    or Hugging Face run failed with a traceback (TypeError: TextInputSequence must be str), a
    char run read the byte as unk. One line, as generate's --prompt, before the run is read."""
    argv = [str(tmp_path / "nope") if a == "RUN" else a for a in argv]
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        f"attnlab: error: {flag} is not UTF-8 text (invalid continuation byte at byte 6); the "
        f"shell passed it in another encoding: give UTF-8 text\n")
