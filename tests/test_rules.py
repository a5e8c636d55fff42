"""One declaration per rule: where the library and the command line both check a value, they
check it from one declaration, so the two cannot drift apart — the same values refused, the
library naming its argument (ValueError) and the command line the flag (exit 2, one line)."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import torch

from attnlab.cli import main
from attnlab.generation import select_next_token
from attnlab.nn import MultiheadAttention
from attnlab.paths import check_output
from attnlab.settings import heads_divide_width

from .reliability.conftest import write_corpus

# (argument, value, allowed): edges on both sides of each range of SamplingSettings
SAMPLING = [
    ("temperature", 0.0, False), ("temperature", -1.0, False), ("temperature", float("inf"), False),
    ("temperature", 1e-3, True),
    ("top_k", 0, False), ("top_k", -3, False), ("top_k", 1, True),
    ("top_p", 0.0, False), ("top_p", 1.5, False), ("top_p", float("nan"), False),
    ("top_p", 1.0, True), ("top_p", 1e-9, True),
]


@pytest.mark.parametrize("name, value, allowed", SAMPLING)
def test_the_sampling_library_refuses_what_the_declaration_refuses(name, value, allowed):
    def select():
        select_next_token(torch.zeros(2, 5), do_sample=True, **{name: value})

    if allowed:
        select()
    else:
        # 0, the range's edge, is told the floor's reason: greedy decoding is --greedy
        said = (rf"^{name} {value} is too small .*--greedy" if (name, value) == ("temperature", 0)
                else rf"^{name} must be .*, got {value}$")
        with pytest.raises(ValueError, match=said):
            select()


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("lm")
    assert main(["train", "lm", "--data", str(write_corpus(tmp / "c.txt")), "--out",
                 str(tmp / "run"), "--block-size", "16", "--model-dim", "16", "--num-heads", "2",
                 "--num-layers", "1", "--max-steps", "2", "--val-batches", "1", "--threads", "1",
                 "--precision", "32"]) == 0
    return tmp / "run"


@pytest.mark.slow
def test_generate_refuses_and_allows_the_same_values_as_the_library(lm_run, capsys):
    for name, value, allowed in SAMPLING:
        flag = "--" + name.replace("_", "-")
        code = main(["generate", str(lm_run), "--prompt", "the", "--max-new-tokens", "2",
                     flag, str(value)])
        err = capsys.readouterr().err.strip()
        assert code == (0 if allowed else 2), (flag, value, err)
        if (name, value) == ("temperature", 0):  # the range's edge: the floor's reason
            assert err.startswith(f"attnlab: error: {flag} {value} is too small") and \
                "--greedy" in err, err
        elif not allowed:
            assert err == f"attnlab: error: {flag} must be " + err.split(" must be ", 1)[1]
            assert err.endswith(f"got {value}"), err


@pytest.mark.parametrize("argv", [
    ["train", "reverse", "--threads", "300"],
    ["predict", "missing", "--input", "1 2", "--threads", "300"],
    ["generate", "missing", "--prompt", "a", "--threads", "300"],
])
def test_threads_is_one_setting_for_training_and_every_command(argv, capsys):
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == \
        "attnlab: error: --threads must be an integer from 1 to 256, got 300"


def test_the_heads_rule_is_one_message_in_the_library_and_on_the_command_line(capsys, tmp_path):
    with pytest.raises(ValueError) as found:
        MultiheadAttention(12, 12, 8)
    assert str(found.value) == heads_divide_width(12, 8, names=("embed_dim", "num_heads"))
    assert main(["train", "reverse", "--model-dim", "30", "--num-heads", "4",
                 "--out", str(tmp_path / "r")]) == 2
    assert capsys.readouterr().err.strip() == f"attnlab: error: {heads_divide_width(30, 4)}"
    assert not (tmp_path / "r").exists()


# --- where a command writes: one rule ----------------------------------------------------------

def _a_file(tmp_path):
    (tmp_path / "f").write_text("not a directory")
    return tmp_path / "f"


def _commands_writing_under(path, tmp_path):
    """Every command that writes a file or directory, told to write under ``path``."""
    corpus = write_corpus(tmp_path / "corpus.txt")
    return {
        "train --out": ["train", "reverse", "--out", str(path / "run")],
        "prepare --out": ["prepare", str(corpus), "--out", str(path / "corpus")],
        "data jets --out": ["data", "jets", "--signal", "1", "--background", "1",
                            "--out", str(path / "jets.h5")],
        "plot pe --out": ["plot", "pe", "--out", str(path / "pe.png")],
        "plot lr --out": ["plot", "lr", "--out", str(path / "lr.png")],
    }


def test_every_command_refuses_a_path_under_a_file_in_the_same_words(tmp_path, capsys):
    blocker = _a_file(tmp_path)
    for what, argv in _commands_writing_under(blocker, tmp_path).items():
        assert main(argv) == 2, what
        err = capsys.readouterr().err.strip()
        flag = what.split()[-1]
        assert err.startswith(f"attnlab: error: {flag} {blocker}/") and \
            err.endswith(f"lies under {blocker}, which is a file, not a directory"), (what, err)
    assert blocker.read_text() == "not a directory"


def test_a_python_calls_tilde_is_taken_as_it_is_and_never_makes_a_directory_named_tilde(
        tmp_path, monkeypatch):
    """From Python, as with pathlib, a path is taken as it is (the command line expands a
    ``~``, tests/cli/test_paths_home.py): ``check_output("~/run", ...)``, which every writer
    calls (``attnlab.data.corpus.prepare(files, "~/pp")`` too), is refused naming the path
    meant, and no directory named ``~`` is made, which ``rm -r ~`` would take for the home.
    ``Task.check_settings`` leaves a ``~`` as it is, as that message says."""
    from attnlab.data.corpus import prepare
    from attnlab.errors import UsageError
    from attnlab.tasks import get_task

    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    write_corpus(tmp_path / "corpus.txt")
    why = "'~' is not expanded here (a path handed to a Python function)"
    with pytest.raises(UsageError) as e:
        check_output("~/run", "--out", directory=True)
    assert str(e.value) == (f"--out ~/run: {why}, so it would name '~' in {work}; write it out "
                            f"in full, e.g. {home}/run")
    with pytest.raises(UsageError, match=f"~/pp: {re.escape(why)}.* e.g. {home}/pp"):
        prepare([str(tmp_path / "corpus.txt")], "~/pp")
    cfg = {"data": "~/reviews.csv", "class_weights": "~/cw.json"}
    get_task("classify").check_settings(cfg, typed_only=True)
    assert (cfg["data"], cfg["class_weights"]) == ("~/reviews.csv", "~/cw.json")
    assert list(work.iterdir()) == [] and not home.exists()


def test_a_directory_named_tilde_that_exists_is_the_users_own(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "~").mkdir()
    assert check_output("~/run", "--out", directory=True) == Path("~/run")


@pytest.mark.parametrize("case, directory, message", [
    ("empty", True, "--out is empty; name a directory"),
    ("dash", True, "--out -: this command writes a directory, not to standard output; name a "
                   "directory"),
    ("dash", False, "--out -: this command writes a file, not to standard output; name a file"),
    ("file for a directory", True, "--out {p} is a file, not a directory"),
    ("directory for a file", False, "--out {p} is a directory; name a file in it, e.g. {p}/out"),
    ("under a file", False, "--out {p} lies under {parent}, which is a file, not a directory"),
    ("dangling link", True, "--out {p}: {parent} is a broken or looping symbolic link"),
    ("missing parent", False, "--out {p}: the directory {parent} does not exist"),
])
def test_check_output_names_the_flag_the_path_and_why(case, directory, message, tmp_path):
    parent = tmp_path / "x"
    p = {"empty": "", "dash": "-", "file for a directory": _a_file(tmp_path),
         "directory for a file": tmp_path, "under a file": parent / "y"}.get(case, parent / "y")
    if case == "under a file":
        parent.write_text("")
    if case == "dangling link":
        os.symlink(tmp_path / "nowhere", parent)
    with pytest.raises(Exception) as found:
        check_output(p, "--out", directory=directory, make_parents=case != "missing parent")
    assert str(found.value) == message.format(p=p, parent=parent)


def test_check_output_creates_nothing(tmp_path):
    out = check_output(tmp_path / "a" / "b", "--out", directory=True)
    assert out == tmp_path / "a" / "b" and list(tmp_path.iterdir()) == []


def test_generate_takes_its_sampling_flags_from_the_librarys_declaration(capsys):
    """--help shows each SamplingSettings field as a flag with the field's metavar and help."""
    import dataclasses

    from attnlab.settings import SamplingSettings

    with pytest.raises(SystemExit):
        main(["generate", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    for f in dataclasses.fields(SamplingSettings):
        flag = "--" + f.name.replace("_", "-")
        assert f"{flag} {f.metadata['metavar']}" in shown
        assert " ".join(f.metadata["help"].split()) in shown


@pytest.mark.slow
def test_the_generation_length_is_one_rule_in_the_library_and_generate(lm_run, capsys):
    from attnlab.generation import decode

    step = lambda tokens: torch.zeros(tokens.shape[0], 5)  # noqa: E731
    with pytest.raises(ValueError) as found:
        decode(step, torch.tensor([[1]]), 0)
    assert str(found.value) == "max_new_tokens must be a positive integer, got 0"
    assert main(["generate", str(lm_run), "--prompt", "the", "--max-new-tokens", "0"]) == 2
    assert capsys.readouterr().err.strip() == \
        "attnlab: error: --max-new-tokens must be a positive integer, got 0"
