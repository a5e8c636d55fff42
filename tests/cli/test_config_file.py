"""`attnlab train TASK --config FILE` as a user who writes the YAML by hand, or hands it the
config.yaml of an earlier run: each key is used as written or refused in one line (exit 2)
naming the file and the key, before a run directory exists."""
import pytest
import yaml

from attnlab.cli import main

from ..reliability.conftest import task_data, tiny_args
from ..reliability.test_trust_train import one_line_error


def _refused(tmp_path, capsys, text: str) -> str:
    """The one error line of ``attnlab train copy --config FILE`` with ``text`` in FILE; no
    run directory is made."""
    config, out = tmp_path / "c.yaml", tmp_path / "run"
    config.write_text(text)
    assert main(["train", "copy", "--config", str(config), "--out", str(out)]) == 2
    assert not out.exists()
    return one_line_error(capsys).removeprefix(f"attnlab: error: --config {config}: ")


def test_a_file_of_another_task_is_refused_not_trained_as_this_one(tmp_path, capsys):
    """A file that says ``task: reverse`` trained copy with the rest of its settings, unsaid."""
    assert _refused(tmp_path, capsys, "task: reverse\nmax_steps: 5\n") == (
        "task reverse, but this is attnlab train copy (its settings are a reverse run's)")


def test_a_run_of_another_task_is_named_by_its_task_not_by_its_keys(tmp_path, capsys):
    """The config.yaml of a translate run handed to train copy names the task, not a list of
    thirty keys copy does not know."""
    assert _refused(tmp_path, capsys, "task: translate\nsrc: en\ntgt: de\n").startswith(
        "task translate, but this is attnlab train copy")


@pytest.mark.parametrize("text, said", [
    ("max_step: 3\n", "unknown setting(s) max_step; did you mean max_steps?"),
    ("warmpu: 5\nmax-step: 3\n", "unknown setting(s) max_step, warmpu; did you mean "
                                  "max_steps, warmup?"),
    ("colour: red\n", "unknown setting(s) colour")])
def test_a_misspelt_key_is_refused_naming_the_setting_meant(tmp_path, capsys, text, said):
    """The command line suggests --max-steps for --max-step; a --config file's max_step was
    refused with no suggestion."""
    assert _refused(tmp_path, capsys, text) == said


@pytest.mark.parametrize("text, said", [
    ("src: en\n", "unknown setting(s) src; src is a setting of train translate, not of train copy"),
    ("block_size: 8\nsrc: en\nwarmpu: 5\n", "unknown setting(s) block_size, src, warmpu; did you "
     "mean warmup?; block_size is a setting of train lm, src of train translate, not of train "
     "copy")])
def test_a_key_of_another_task_is_refused_naming_that_task(tmp_path, capsys, text, said):
    """A file written for lm or translate, handed to copy, was refused as "unknown setting(s)
    block_size", as if lm's --block-size were a typing error."""
    assert _refused(tmp_path, capsys, text) == said


@pytest.mark.parametrize("word, read", [("no", "false"), ("off", "false"), ("Yes", "true")])
def test_a_text_that_yaml_reads_as_a_boolean_is_refused_saying_to_quote_it(tmp_path, capsys,
                                                                           word, read):
    """`tgt: no` (Norwegian) was refused as "tgt must be text, got False": a value the user
    never wrote, and no word of why (YAML 1.1 reads yes, no, on and off as booleans)."""
    config, out = tmp_path / "c.yaml", tmp_path / "run"
    config.write_text(f"tgt: {word}\n")
    assert main(["train", "translate", "--config", str(config), "--out", str(out)]) == 2
    assert one_line_error(capsys) == (
        f"attnlab: error: --config {config}: tgt must be text, got {read} (YAML reads an unquoted "
        f"yes, no, on or off as true or false; quote a text: 'no')")
    assert not out.exists()


@pytest.mark.parametrize("text, said", [
    ("seed: 2024-01-01\n", "seed must be an integer, got 2024-01-01"),
    ("seed: 2024-01-01 10:30:00\n", "seed must be an integer, got 2024-01-01 10:30:00")])
def test_a_date_is_named_as_the_file_wrote_it(tmp_path, capsys, text, said):
    """YAML reads an unquoted date as one: it was shown as Python's datetime.date(2024, 1, 1)."""
    assert _refused(tmp_path, capsys, text) == said


@pytest.mark.parametrize("text, key", [("1: 2\n", "1"), ("~: 2\n", "null"),
                                       ("max_steps: 5\n3.5: x\n", "3.5")])
def test_a_key_that_is_not_text_is_refused_in_one_line(tmp_path, capsys, text, key):
    """A number or null as a key was an AttributeError traceback (exit 1)."""
    assert _refused(tmp_path, capsys, text) == (
        f"the key {key} is not a setting name (a key is text, such as max_steps)")


@pytest.mark.parametrize("text, said", [
    ("schedule: null\n", "schedule must be one of cosine, noam, wsd, linear, constant, got null"),
    ("lr: ~\n", "lr must be a number, got null"),
    ("norm_first: null\n", "norm_first must be true or false, got null")])
def test_a_null_is_named_as_the_file_wrote_it(tmp_path, capsys, text, said):
    """YAML's null was shown as Python's None ("got 'None'", as if the file said the text)."""
    assert _refused(tmp_path, capsys, text) == said


def test_a_null_column_name_is_refused_naming_the_file_not_a_flag(tmp_path, capsys):
    """`label_column: null` passed the file's check (a text setting let None through) and was
    refused later as "--label-column must be a column name, got None", a flag never given."""
    data = tmp_path / "d.csv"
    data.write_text("text,label\n" + "".join(f"w{i} x,{i % 2}\n" for i in range(20)))
    config, out = tmp_path / "c.yaml", tmp_path / "run"
    config.write_text("label_column: null\n")
    assert main(["train", "classify", "--data", str(data), "--config", str(config), "--out",
                 str(out)]) == 2
    assert one_line_error(capsys) == (f"attnlab: error: --config {config}: label_column must "
                                      f"be text, got null")
    assert not out.exists()


def _reuse(tmp_path, capsys, task: str, *args: str) -> tuple[dict, dict, str]:
    """A tiny run of ``task``, then a second one from ``--config`` its config.yaml: both
    config.yaml files, read back, and the second run's stderr."""
    first, second = tmp_path / "first", tmp_path / "second"
    assert main(["train", task, "--out", str(first), *args]) == 0
    capsys.readouterr()
    assert main(["train", task, "--config", str(first / "config.yaml"), "--out",
                 str(second)]) == 0
    err = capsys.readouterr().err
    return (yaml.safe_load((first / "config.yaml").read_text()),
            yaml.safe_load((second / "config.yaml").read_text()), err)


@pytest.mark.slow
def test_a_runs_config_yaml_trains_the_same_settings_again(tmp_path, capsys):
    """--config RUN/config.yaml was refused for what the run worked out as it started
    ("unknown setting(s) epochs_of_all_processes"); it now trains the same settings, the
    worked-out values named in one note and worked out again."""
    before, after, err = _reuse(tmp_path, capsys, "reverse", "--max-steps", "2",
                                "--train-size", "64", "--val-size", "16", "--test-size", "16",
                                "--model-dim", "16", "--num-heads", "2", "--threads", "1")
    assert before.pop("out") != after.pop("out")
    assert after == before
    assert "epochs_of_all_processes, out, resume: the run that wrote it worked them out" in err
    # resumed from its own config.yaml, the run is the one that wrote it: no such note (it
    # said "not settings of this new run" of the run being continued)
    second = tmp_path / "second"
    assert main(["train", "reverse", "--config", str(second / "config.yaml"), "--out",
                 str(second), "--resume", "--max-steps", "3"]) == 0
    assert "not settings of this new run" not in capsys.readouterr().err


@pytest.mark.slow
def test_a_classify_runs_config_yaml_is_not_refused_for_its_recorded_defaults(tmp_path, capsys):
    """A classify run records --threshold and --label-sep at their defaults; handed back as
    --config they were refused as unused ("only with --multi-label"), and its labels and
    data digest as unknown settings."""
    data = task_data(tmp_path)
    before, after, err = _reuse(tmp_path, capsys, "classify",
                                *tiny_args("classify", data, "--max-steps", "2"))
    assert before.pop("out") != after.pop("out")
    assert after == before
    assert "data_sha256" in err and "labels" in err


REVERSE = ["--max-steps", "2", "--train-size", "64", "--val-size", "16", "--test-size", "16",
           "--model-dim", "16", "--num-heads", "2", "--threads", "1"]


@pytest.mark.slow
def test_a_resumed_runs_config_yaml_starts_a_new_run_not_that_one_again(tmp_path, capsys,
                                                                        monkeypatch):
    """A resumed run records resume: true and its out: handed back as --config without --out,
    it continued that run in its own directory (its weights, metrics and config.yaml
    replaced), and with --out NEW it was refused as "--resume: NEW/config.yaml not found"."""
    monkeypatch.chdir(tmp_path)
    first = tmp_path / "first"
    assert main(["train", "reverse", "--out", str(first), *REVERSE]) == 0
    assert main(["train", "reverse", "--out", str(first), "--resume", "--max-steps", "3"]) == 0
    kept = {p.name: p.read_bytes() for p in first.iterdir() if p.is_file()}
    capsys.readouterr()
    assert main(["train", "reverse", "--config", str(first / "config.yaml")]) == 0
    assert {p.name: p.read_bytes() for p in first.iterdir() if p.is_file()} == kept
    [new] = (tmp_path / "runs").iterdir()
    assert yaml.safe_load((new / "config.yaml").read_text())["max_steps"] == 3
    assert "out, resume: the run that wrote it" in capsys.readouterr().err
    assert main(["train", "reverse", "--config", str(first / "config.yaml"), "--out",
                 str(tmp_path / "second")]) == 0


@pytest.mark.slow
def test_a_budget_given_as_a_flag_wins_over_the_files_other_budget(tmp_path, capsys):
    """--config RUN/config.yaml --epochs 1 was refused as "--epochs 1 and --max-steps 2:
    give one budget", the --max-steps being the file's."""
    first = tmp_path / "first"
    assert main(["train", "reverse", "--out", str(first), *REVERSE]) == 0
    assert main(["train", "reverse", "--config", str(first / "config.yaml"), "--out",
                 str(tmp_path / "second"), "--epochs", "1"]) == 0
    again = yaml.safe_load((tmp_path / "second" / "config.yaml").read_text())
    assert again["epochs"] == 1 and "max_steps" not in again
    (tmp_path / "c.yaml").write_text("epochs: 1\n")  # written by hand: the flag wins too
    assert main(["train", "reverse", "--config", str(tmp_path / "c.yaml"), "--out",
                 str(tmp_path / "third"), *REVERSE]) == 0
    again = yaml.safe_load((tmp_path / "third" / "config.yaml").read_text())
    assert again["max_steps"] == 2 and again.get("epochs") is None


@pytest.mark.parametrize("recorded_beta2", [0.999, 0.95])
def test_a_noam_runs_beta2_is_not_carried_into_another_schedule(tmp_path, recorded_beta2):
    """A Noam run's config.yaml records the beta2 its AdamW took (0.98), or, from before, the
    default or an ignored --beta2 (0.95): handed back with --schedule cosine, cosine trained
    with 0.98, a value nobody chose; with noam, a recorded 0.95 was refused as --beta2."""
    from attnlab.commands.train import build_config
    from attnlab.runs import write_yaml

    record = build_config("reverse", {"schedule": "noam", "out": str(tmp_path / "r")}).record()
    write_yaml(tmp_path / "config.yaml", {**record, "beta2": recorded_beta2})
    given = {"config": str(tmp_path / "config.yaml")}
    # (its --lr, Noam's factor, is no rate of cosine's: given, test_a_runs_lr_is_not_carried...)
    assert build_config("reverse", {**given, "schedule": "cosine", "lr": 1e-3}).beta2 == 0.999
    assert build_config("reverse", given).beta2 == 0.98


@pytest.mark.parametrize("recorded, schedule, aside", [
    ("wsd", "cosine", "cooldown 0.2, min_lr 0.0; set aside (give --min-lr to set it)"),
    ("wsd", "linear", "cooldown 0.2, min_lr 0.0; set aside (give --min-lr to set it)"),
    ("linear", "constant", "min_lr 0.0; set aside")])
def test_a_runs_config_yaml_takes_another_schedule(tmp_path, capsys, recorded, schedule,
                                                   aside):
    """A wsd or linear run records the --cooldown and --min-lr it trained with (0.2 and 0,
    filled in): handed back with --schedule cosine, the run was refused as "--cooldown 0.2 is
    the decay share of --schedule wsd", a flag never given, and nothing but an edit of the
    file let it vary its schedule. Those of the schedule the new one has not are set aside."""
    from attnlab.commands.train import build_config
    from attnlab.runs import write_yaml

    record = build_config("reverse", {"schedule": recorded, "out": str(tmp_path / "r")})
    write_yaml(tmp_path / "config.yaml", record.record())
    capsys.readouterr()
    cfg = build_config("reverse", {"config": str(tmp_path / "config.yaml"),
                                   "schedule": schedule})
    assert cfg.schedule == schedule
    assert cfg.cooldown is None
    # the min_lr 0 a wsd run filled in, kept under cosine, trained nanoGPT's cosine (decay from
    # the end of warm-up) instead of the course's, unsaid: the new schedule fills in its own
    assert cfg.min_lr == (0.0 if schedule == "linear" else None)
    settings, why = aside.split("; ", 1)
    assert (f"note: --config {tmp_path / 'config.yaml'}: {settings}: settings of its --schedule "
            f"{recorded}, not of --schedule {schedule}; {why}\n") in capsys.readouterr().err


@pytest.mark.parametrize("recorded, lr, schedule, said", [
    ("noam", 2.0, "cosine", "lr 2.0 is the factor of its --schedule noam, not a rate of "
                            "--schedule cosine; give --lr"),
    ("cosine", 0.001, "noam", "lr 0.001 is a rate of its --schedule cosine, not a factor of "
                              "--schedule noam; give --lr")])
def test_a_runs_lr_is_not_carried_between_noam_and_a_rate(tmp_path, capsys, recorded, lr,
                                                          schedule, said):
    """Noam's --lr is a factor, the other schedules' a rate: a Noam run's factor 2 handed back
    with --schedule cosine trained at a peak rate of 2.0, noted only for beta2."""
    from attnlab.commands.train import build_config
    from attnlab.runs import write_yaml

    record = build_config("reverse", {"schedule": recorded, "lr": lr, "out": str(tmp_path / "r")})
    write_yaml(tmp_path / "config.yaml", record.record())
    out = tmp_path / "new"
    assert main(["train", "reverse", "--config", str(tmp_path / "config.yaml"), "--schedule",
                 schedule, "--out", str(out)]) == 2
    assert not out.exists()
    assert one_line_error(capsys) == f"attnlab: error: --config {tmp_path / 'config.yaml'}: {said}"
    given = build_config("reverse", {"config": str(tmp_path / "config.yaml"),
                                     "schedule": schedule, "lr": 0.5})
    assert (given.schedule, given.lr) == (schedule, 0.5)


def test_a_runs_config_yaml_without_its_schedule_line_takes_another(tmp_path, capsys):
    """A run's config.yaml whose schedule line was deleted by hand (the task's default then)
    ended in a KeyError traceback once another --schedule was given."""
    from attnlab.commands.train import build_config
    from attnlab.runs import write_yaml

    record = build_config("reverse", {"schedule": "wsd", "out": str(tmp_path / "r")}).record()
    del record["schedule"]  # reverse's default: cosine
    write_yaml(tmp_path / "config.yaml", record)
    cfg = build_config("reverse", {"config": str(tmp_path / "config.yaml"), "schedule": "noam",
                                   "lr": 2.0})
    assert (cfg.schedule, cfg.cooldown, cfg.min_lr) == ("noam", None, None)
    assert "settings of its --schedule cosine, not of --schedule noam" in capsys.readouterr().err


@pytest.mark.slow
def test_a_prepared_corpus_runs_config_yaml_trains_again(tmp_path, capsys):
    """An lm run on a prepared corpus records its tokenizer and vocabulary size, which a new
    run's checks refused as "--vocab-size: for a text file only"."""
    (tmp_path / "t.txt").write_text("the cat sat on the mat. " * 200)
    corpus = tmp_path / "corpus"
    assert main(["prepare", str(tmp_path / "t.txt"), "--out", str(corpus),
                 "--tokenizer", "char"]) == 0
    before, after, _ = _reuse(tmp_path, capsys, "lm", "--data", str(corpus), "--max-steps", "2",
                              "--block-size", "16", "--model-dim", "16", "--num-heads", "2",
                              "--num-layers", "1", "--threads", "1")
    assert before.pop("out") != after.pop("out")
    assert after == before


@pytest.mark.slow
def test_an_init_runs_config_yaml_trains_again(tmp_path, capsys):
    """A run from --init records the model --init gave it (an lm's max_len; a BERT's
    activation, pad_id), which --config refused as unknown settings."""
    (tmp_path / "t.txt").write_text("the cat sat on the mat. " * 200)
    tiny = ["--data", str(tmp_path / "t.txt"), "--max-steps", "2", "--threads", "1"]
    assert main(["train", "lm", "--out", str(tmp_path / "base"), "--block-size", "16",
                 "--model-dim", "16", "--num-heads", "2", "--num-layers", "1", *tiny]) == 0
    before, after, err = _reuse(tmp_path, capsys, "lm", "--init", str(tmp_path / "base"), *tiny)
    for own in ("out", "data_dir"):  # the run's own directory, and its corpus there
        assert before.pop(own) != after.pop(own)
    assert after == before and "max_len" in err


def test_an_octal_or_hex_prefix_without_digits_is_refused_in_one_line(tmp_path, capsys):
    """``max_steps: 0o_`` was a ValueError traceback (int('', 8))."""
    assert _refused(tmp_path, capsys, "max_steps: 0o_\n") == (
        "max_steps must be an integer, got '0o_'")


@pytest.mark.parametrize("text, lr", [("lr: 1e-3\n", 0.001), ("lr: 3E-4\n", 0.0003),
                                      ("lr: 1.0e3\n", 1000.0), ("lr: .5e-2\n", 0.005)])
def test_a_number_with_an_exponent_is_the_number(tmp_path, text, lr):
    """``lr: 1e-3`` was refused as "lr must be a number, got '1e-3'": PyYAML reads YAML 1.1,
    whose numbers need a dot and a signed exponent; a --config file is read as YAML 1.2 reads
    it, as the user meant."""
    from attnlab.commands.train import build_config

    config = tmp_path / "c.yaml"
    config.write_text(text)
    assert build_config("copy", {"config": str(config)}).lr == lr


def test_a_quoted_number_is_still_text_and_refused(tmp_path, capsys):
    assert _refused(tmp_path, capsys, "lr: '1e-3'\n") == "lr must be a number, got '1e-3'"


def test_a_text_like_1e3_in_a_written_file_reads_back_as_that_text(tmp_path):
    """config.yaml quotes a text that a --config file would read as a number (a column named
    1e5), so a run's config.yaml handed to --config keeps it."""
    from attnlab.runs import read_yaml, write_yaml

    write_yaml(tmp_path / "c.yaml", {"text_column": "1e5", "lr": 1e-5})
    assert read_yaml(tmp_path / "c.yaml", hand_written=True) == {"text_column": "1e5", "lr": 1e-5}


@pytest.mark.parametrize("task, given, message", [
    ("classify", ["--test="], "--test is empty; name a file"),
    ("classify", ["--val="], "--val is empty; name a file"),
    ("classify", ["--set-column="],
     "--set-column is empty; name the column whose value groups rows into sets"),
    ("tag", ["--test="], "--test is empty; name a file"),
    ("translate", ["--data="], "--data is empty; name a file"),
    ("jets", ["--data", "jets.h5", "--val="], "--val is empty; name a file"),
    ("lm", ["--freeze="], "--freeze is empty; give none, encoder or all-but-last-N"),
])
def test_an_empty_file_or_column_is_refused_not_read_as_not_given(tmp_path, capsys, task,
                                                                  given, message):
    """``--test ""`` (a shell variable left unset) trained and tested on --test-fraction of
    --data, and config.yaml recorded ``test: ''``; ``--data ""`` of translate was the current
    directory."""
    tiny = ([] if task in ("jets", "translate")  # refused before training all the same
            else tiny_args(task, task_data(tmp_path), "--max-steps", "1"))
    out = tmp_path / "run"
    assert main(["train", task, *tiny, *given, "--out", str(out)]) == 2
    assert one_line_error(capsys) == f"attnlab: error: {message}"
    assert not out.exists()


def test_an_empty_file_in_a_config_file_is_named_by_its_key(tmp_path, capsys):
    data = task_data(tmp_path)
    config, out = tmp_path / "c.yaml", tmp_path / "run"
    config.write_text("test: ''\n")
    assert main(["train", "classify", *tiny_args("classify", data, "--max-steps", "1"),
                 "--config", str(config), "--out", str(out)]) == 2
    assert one_line_error(capsys) == (f"attnlab: error: --config {config}: test is empty; "
                                      f"name a file")
    assert not out.exists()



@pytest.mark.parametrize("threshold", ["0.7", "0.5"])
def test_a_value_written_by_hand_is_still_refused_where_unused(tmp_path, capsys, threshold):
    """A hand-written file names what it means: a --threshold without --multi-label is
    refused as unused, as the flag is, the default 0.5 too."""
    data = task_data(tmp_path)
    config, out = tmp_path / "c.yaml", tmp_path / "run"
    config.write_text(f"threshold: {threshold}\n")
    assert main(["train", "classify", "--data", str(data["classify"]), "--config", str(config),
                 "--out", str(out)]) == 2
    assert "--threshold" in one_line_error(capsys)
    assert not out.exists()


@pytest.mark.parametrize("text, steps", [("max_steps: 010\n", 10), ("max_steps: 1_000\n", 1000),
                                         ("max_steps: 0o17\n", 15), ("max_steps: 0x10\n", 16)])
def test_an_integer_is_read_as_written(tmp_path, text, steps):
    """``max_steps: 010`` trained 8 steps: YAML 1.1 reads a leading zero as octal; a --config
    file is read as YAML 1.2 reads it (0o17 is octal)."""
    from attnlab.commands.train import build_config

    config = tmp_path / "c.yaml"
    config.write_text(text)
    assert build_config("copy", {"config": str(config)}).max_steps == steps


def test_a_time_of_day_is_not_an_integer(tmp_path, capsys):
    """``max_steps: 1:30`` trained 90 steps (YAML 1.1's base-60 integers)."""
    assert _refused(tmp_path, capsys, "max_steps: 1:30\n") == (
        "max_steps must be an integer, got '1:30'")


@pytest.mark.parametrize("text, said", [
    ("max_steps:\t5\n", "found character '\\t' that cannot start any token, line 1, column 11"),
    ("seed: 3\nlr: [0.1\n", "expected ',' or ']', but got '<stream end>', line 3, column 1")])
def test_a_file_yaml_cannot_read_says_what_is_wrong_and_where(tmp_path, capsys, text, said):
    """A tab, or a list left open: the message said only PyYAML's context ("while scanning
    for the next token"), not the character at fault nor its line."""
    config, out = tmp_path / "c.yaml", tmp_path / "run"
    config.write_text(text)
    assert main(["train", "copy", "--config", str(config), "--out", str(out)]) == 2
    assert not out.exists()
    assert one_line_error(capsys) == (
        f"attnlab: error: --config: {config} is not valid YAML ({said})")


def test_a_flag_over_a_key_of_the_file_is_said_naming_both_values(tmp_path, capsys):
    """Flags win over the file, as documented, but the file's ``lr: 0.001`` was dropped
    without a word: a user who wrote it there, and typed --lr out of habit, trained at the
    flag's rate unawares."""
    from attnlab.commands.train import build_config

    config = tmp_path / "c.yaml"
    config.write_text("lr: 0.001\nmax_steps: 5\nnorm_first: true\nwarmup: 3\n")
    cfg = build_config("copy", {"config": str(config), "lr": 3e-4,
                                "norm_first": False, "warmup": 3})
    assert (cfg.lr, cfg.max_steps, cfg.norm_first, cfg.warmup) == (3e-4, 5, False, 3)
    assert capsys.readouterr().err == (
        f"note: --config {config}: flags win: --lr 0.0003 over its lr: 0.001; --no-norm-first "
        f"over its norm_first: true\n")  # warmup: the same value, nothing to say
    build_config("copy", {"config": str(config), "epochs": 2})  # a budget over the other one
    assert capsys.readouterr().err == (f"note: --config {config}: flags win: --epochs 2 over "
                                       f"its max_steps: 5\n")
    # a run's own config.yaml records the budget it did not use as null: set nothing, and
    # "--max-steps 2 over its epochs: null" named a value the file never gave
    config.write_text("lr: 0.001\nepochs: null\nmax_steps: 5\n")
    build_config("copy", {"config": str(config), "max_steps": 2})
    assert capsys.readouterr().err == (f"note: --config {config}: flags win: --max-steps 2 "
                                       f"over its max_steps: 5\n")
    config.write_text("lr: 0.001\nepochs: null\n")
    build_config("copy", {"config": str(config), "max_steps": 2})
    assert capsys.readouterr().err == ""
