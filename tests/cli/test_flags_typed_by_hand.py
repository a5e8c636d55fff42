"""Flags typed by hand, with the slips a tired user makes: a flag given twice, or both
spellings of a switch. argparse keeps the last value and says nothing; attnlab refuses a second
input, file or list (exit 2, one line, nothing written) and says which value of any other flag
it used (a script may append a flag to override its own)."""
import pytest

from attnlab.cli import build_parser, main

from .test_errors_common import _fails


@pytest.mark.parametrize("argv, named", [
    (["train", "reverse", "--config", "a.yaml", "--config", "b.yaml"],
     "--config is given 2 times; it takes one file"),
    # the second matrix of queries was explained, the first dropped without a word
    (["explain", "--q", "[[0,10,0]]", "--q", "[[0,0,10]]"], "--q is given 2 times; it takes one list"),
    (["explain", "--mask", "[[1,1,1,1]]", "--k", "[[1]]", "--mask=[[1,0,0,0]]"],
     "--mask is given 2 times"),
])
def test_an_input_given_twice_is_refused(argv, named, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _fails(argv, capsys, named)
    assert not list(tmp_path.iterdir())  # nothing written


def test_a_setting_given_twice_keeps_the_last_and_says_so():
    """`train reverse --lr 1e-3 ... --lr 3e-4` trained at 3e-4, unsaid; the note names both."""
    args = build_parser().parse_args(["train", "reverse", "--lr", "1e-3", "--max-steps", "2",
                                      "--lr=3e-4"])
    assert args.lr == 3e-4
    assert args.flag_notes == ["note: --lr is given 2 times (0.001, 0.0003); the last, 0.0003, "
                               "is used"]
    # the same value again chooses nothing: no note
    args = build_parser().parse_args(["train", "reverse", "--lr", "1e-3", "--lr", "0.001"])
    assert args.flag_notes == []
    args = build_parser().parse_args(["train", "reverse", "--norm-first", "--no-norm-first"])
    assert args.norm_first is False and args.flag_notes == [
        "note: --norm-first and --no-norm-first are both given; the last, --no-norm-first, is used"]


@pytest.mark.slow  # draws a figure (matplotlib)
def test_a_command_that_does_not_train_says_the_note_once_it_is_done(capsys, tmp_path,
                                                                    monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["plot", "pe", "--d-model", "8", "--out", "pe.png", "--d-model", "16"]) == 0
    err = capsys.readouterr().err
    assert err == "note: --d-model is given 2 times (8, 16); the last, 16, is used\n"
    assert (tmp_path / "pe.png").is_file()


def test_a_refusal_after_a_repeated_flag_is_one_line(capsys, tmp_path, monkeypatch):
    """The note of a flag given twice was said before the refusal that followed it: two lines
    for one error. A refused command says its error alone."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "existing").mkdir()
    (tmp_path / "existing" / "mine.txt").write_text("kept")
    _fails(["train", "reverse", "--out", "existing", "--lr", "1e-3", "--lr", "3e-4"], capsys,
           "--out existing already holds files")
    _fails(["predict", str(tmp_path / "nope"), "--threads", "1", "--threads", "2", "--input",
            "x"], capsys, "run directory not found")
    assert (tmp_path / "existing" / "mine.txt").read_text() == "kept"


def test_a_repeated_flag_that_collects_values_still_collects_them():
    """``generate --stop`` is given once per text to stop at: a repeat is its use."""
    args = build_parser().parse_args(["generate", "d", "--prompt", "x", "--stop", "a",
                                      "--stop", "b", "--greedy", "--greedy"])
    assert args.stop == ["a", "b"] and args.greedy is True and args.flag_notes == []


@pytest.mark.slow
def test_train_says_the_note_once_its_settings_pass(capsys, tmp_path):
    """The note comes after the checks: a refused run stays the one line of its error."""
    out = tmp_path / "run"
    _fails(["train", "reverse", "--out", str(out), "--lr", "1", "--lr", "-1"], capsys,
           "--lr must be > 0, got -1.0")
    assert main(["train", "reverse", "--out", str(out), "--max-steps", "1", "--max-steps", "2",
                 "--model-dim", "16", "--num-heads", "2", "--num-layers", "1",
                 "--test-size", "8", "--val-size", "8", "--train-size", "16"]) == 0
    err = capsys.readouterr().err
    assert "note: --max-steps is given 2 times (1, 2); the last, 2, is used" in err


@pytest.mark.parametrize("argv, said", [
    # was "did you mean --batch-size?": a flag it is not
    (["train", "reverse", "--block-size", "8"],
     "train reverse: unrecognized arguments: --block-size 8; --block-size is a flag of train lm, "
     "not of train reverse"),
    (["train", "lm", "--seq-len=3"], "--seq-len is a flag of train reverse, train copy, "
                                     "train sort, not of train lm"),
    (["plot", "pe", "--schedule", "noam"], "--schedule is a flag of plot lr, not of plot pe"),
    (["predict", "RUN", "--input", "1", "--beam", "3"],
     "--beam is a flag of translate, not of predict"),
    # a misspelt flag of its own is still answered with the closest
    (["train", "lm", "--max-step", "3"], "--max-step 3; did you mean --max-steps?"),
])
def test_a_flag_of_another_command_is_named_as_that_commands(argv, said, capsys, tmp_path,
                                                            monkeypatch):
    monkeypatch.chdir(tmp_path)
    _fails(argv, capsys, said)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("argv, said", [
    # was "argument -h/--help: ignored explicit argument 'f'"
    (["export", "RUN", "-hf", "out"], "export: -hf is read as -h followed by 'f'; did you mean --hf?"),
    # --hinput is no flag: guessing --input named a flag the user did not type
    (["predict", "RUN", "-hinput", "3"], "-hinput is read as -h followed by 'input'; -h alone "
                                         "prints help"),
    (["train", "reverse", "-hf"], "-hf is read as -h followed by 'f'; -h alone prints help; "
                                  "a long flag takes two dashes"),
    # was "did you mean --ff?": train lm has --ff, but no --hf, and -hf meant neither
    (["train", "lm", "-hf"], "train lm: -hf is read as -h followed by 'f'; -h alone prints "
                             "help; a long flag takes two dashes"),
])
def test_a_long_flag_with_one_dash_after_h_is_named_as_typed(argv, said, capsys):
    _fails(argv, capsys, said)


@pytest.mark.parametrize("source", ["flag", "file"])
def test_a_huge_device_count_is_a_usage_error_not_an_out_of_memory_fault(source, capsys,
                                                                        tmp_path):
    """``--devices 1000000000000`` (a slip of the keyboard) made Lightning list a trillion
    devices: exit 1, "attnlab: out of memory:" and nothing after the colon."""
    out = tmp_path / "run"
    if source == "file":
        (tmp_path / "c.yaml").write_text("devices: 1000000000000\n")
        given = ["--config", str(tmp_path / "c.yaml")]
    else:
        given = ["--devices", "1000000000000"]
    said = _fails(["train", "reverse", "--out", str(out), *given], capsys, "devices",
                  "1000000000000 is too large (at most 256)")
    # its own reason: "more than any machine has cores" was the reason of --threads, and untrue
    assert "cores" not in said and "GPUs" in said
    assert not out.exists()


def test_a_graph_seed_out_of_range_is_refused_before_the_graph_is_drawn(capsys, tmp_path):
    """``--graph-seed 99999999999999999999999`` ended in torch's "ValueError: Overflow when
    unpacking long long" and a traceback: the graph's seed now has every seed's range."""
    out = tmp_path / "run"
    _fails(["train", "graph", "--out", str(out), "--graph-seed", "99999999999999999999999"],
           capsys, "--graph-seed must be in 0..4294967295, got 99999999999999999999999")
    assert not out.exists()


def test_a_mistyped_token_budget_is_refused_by_predict_alone(capsys, tmp_path):
    """``predict LM --max-new-tokens 1000000000000``: a greedy continuation of a small model
    rarely reaches its end token, and predict, which prints it once it is whole, seemed to
    hang. ``generate`` streams and the library yields token by token: a long sample is theirs
    to take (the cap refused ``decode_stream(step, ids, 1_000_001)`` too)."""
    import torch

    from attnlab.generation import decode_stream

    _fails(["predict", str(tmp_path), "--input", "the", "--max-new-tokens", "1000000000000"],
           capsys, "--max-new-tokens 1000000000000 is too large (at most 1,000,000)")

    def ends_at_once(tokens):  # the end token, 2, most likely: the generation stops there
        return torch.tensor([[0.0, 0.0, 5.0]]).expand(tokens.shape[0], 3)

    made = list(decode_stream(ends_at_once, torch.tensor([[1]]), 1_000_001, eos_token_id=2))
    assert [t.tolist() for t in made] == [[[2]]]
