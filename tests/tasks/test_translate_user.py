"""A translation user's run on their own sentence pairs (accented French to English words):
what ``attnlab translate`` prints for text typed in another Unicode form, and for a
translation the run's length limit cuts short."""
import json
import random
import shutil
import unicodedata

import pytest

import attnlab
from attnlab.cli import main
from attnlab.runs import read_yaml, write_yaml

TINY = ["--model-dim", "32", "--num-heads", "2", "--num-layers", "1", "--dim-feedforward", "64",
        "--lr", "3e-3", "--warmup", "10", "--threads", "1"]
FRENCH = {"le": "the", "un": "a", "café": "coffee", "thé": "tea", "crème": "cream",
          "été": "summer", "élève": "pupil"}


def nfd(text: str) -> str:
    return unicodedata.normalize("NFD", text)


@pytest.fixture(scope="module")
def translate_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("nfc")
    rng = random.Random(0)
    rows = []
    for _ in range(400):
        words = [rng.choice(list(FRENCH)) for _ in range(rng.randint(1, 4))]
        rows.append(" ".join(words) + "\t" + " ".join(FRENCH[w] for w in words))
    (tmp / "pairs.tsv").write_text("source\ttarget\n" + "\n".join(rows) + "\n", encoding="utf-8")
    out = tmp / "run"
    assert main(["train", "translate", "--data", str(tmp / "pairs.tsv"), "--out", str(out),
                 "--max-steps", "150", *TINY]) == 0
    return out


@pytest.mark.slow
def test_translate_reads_decomposed_accents_as_the_composed_text(translate_run, capsys):
    capsys.readouterr()
    text = "le café été"
    assert main(["translate", str(translate_run), text, nfd(text), "--json"]) == 0
    out = capsys.readouterr()
    composed, decomposed = [json.loads(line) for line in out.out.splitlines()]
    assert composed["translation"] == "the coffee summer"  # the run learnt the words
    assert decomposed["translation"] == composed["translation"]
    assert "unknown" not in out.err
    _, tok = attnlab.load(translate_run)
    assert tok.encode(nfd(text)) == tok.encode(text)


@pytest.mark.slow
def test_spaces_around_a_source_do_not_change_its_translation(translate_run, tmp_path, capsys):
    """A file of inputs with trailing spaces (or a tab) is translated as the texts it holds:
    the model never saw a sentence that starts or ends in a space."""
    texts = ["le café été", "un thé crème", "élève"]
    inputs = tmp_path / "inputs.txt"
    inputs.write_text("le café été \n  un thé crème\n\télève\t\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["translate", str(translate_run), *texts]) == 0
    plain = capsys.readouterr().out
    assert plain == "the coffee summer\na tea cream\npupil\n"  # the run learnt the words
    assert main(["translate", str(translate_run), "--input-file", str(inputs)]) == 0
    out = capsys.readouterr()
    assert out.out == plain
    assert out.err == ""  # the tabs are not read: no note names them as unknown to the model
    assert main(["predict", str(translate_run), "--input", "le café été   "]) == 0
    assert capsys.readouterr().out == "the coffee summer\n"


@pytest.mark.slow
def test_a_run_made_before_sources_were_stripped_reads_them_as_it_trained(translate_run,
                                                                          tmp_path):
    """A run made before spaces around a source were dropped trained on them as written: its
    config.yaml has no sources_stripped, and its tokenisers (as attnlab.load, evaluate, predict
    and --resume load them, through the run's settings) read its sources as it trained (they
    read them stripped, so its scores changed and a resume differed)."""
    text = "le café été"
    assert read_yaml(translate_run / "config.yaml")["sources_stripped"] is True
    _, tok = attnlab.load(translate_run)
    assert tok.encode(f" {text} ") == tok.encode(text)  # a new run strips
    old = shutil.copytree(translate_run, tmp_path / "old")
    cfg = read_yaml(old / "config.yaml")
    write_yaml(old / "config.yaml", {k: v for k, v in cfg.items() if k != "sources_stripped"})
    _, tok = attnlab.load(old)
    assert tok.encode(f" {text} ") != tok.encode(text)  # as written, as the run trained


@pytest.mark.slow
def test_a_translation_cut_by_the_runs_length_limit_is_named_in_a_note(translate_run, tmp_path,
                                                                        capsys):
    run = shutil.copytree(translate_run, tmp_path / "run")
    cfg = read_yaml(run / "config.yaml")
    write_yaml(run / "config.yaml", {**cfg, "max_target_len": 2})  # room for 2 tokens, end included
    capsys.readouterr()
    assert main(["translate", str(run), "crème", "le café été", "--json"]) == 0
    out = capsys.readouterr()
    assert [json.loads(line)["translation"] for line in out.out.splitlines()] == [
        "cream", "the coffee"]
    assert out.err.splitlines() == [
        "note: the translation of TEXT number 2 stopped at 2 tokens, the most this run writes "
        "(max_target_len in config.yaml), before the model ended it: it may be cut short"]
    assert main(["translate", str(translate_run), "crème", "le café été"]) == 0
    assert capsys.readouterr().err == ""  # the run's own limit leaves room for these


@pytest.mark.slow
def test_evaluate_names_a_test_translation_the_length_limit_cut(translate_run, tmp_path,
                                                                capsys):
    """The scores count a cut translation as the model's: the user is told which one."""
    run = shutil.copytree(translate_run, tmp_path / "run")
    write_yaml(run / "config.yaml", {**read_yaml(run / "config.yaml"), "max_target_len": 2})
    data = tmp_path / "pairs.tsv"
    data.write_text("source\ttarget\ncrème\tcream\nle café été\tthe coffee summer\n"
                    "un thé crème\ta tea cream\n", encoding="utf-8")
    capsys.readouterr()
    trained = (f"warning: --data {data}: 1 of its 3 rows have an input that a training row has "
               f"too (first: line 2), so its scores are partly of inputs the model trained on")
    assert main(["evaluate", str(run), "--data", str(data)]) == 0
    assert capsys.readouterr().err.splitlines() == [
        f"note: the translation of --data {data} line 3 stopped at 2 tokens, the most this run "
        f"writes (max_target_len in config.yaml), before the model ended it: it may be cut "
        f"short (and 1 more inputs)", trained]
    assert main(["evaluate", str(translate_run), "--data", str(data)]) == 0
    assert capsys.readouterr().err == trained + "\n"


@pytest.mark.parametrize("rows, test, message", [
    (1, False, "has 1 row: too few to hold out test and validation rows and train on the rest; "
               "give at least 3"),
    (2, False, "has 2 rows: too few to hold out test and validation rows and train on the rest; "
               "give at least 3"),
    (1, True, "has 1 row: too few to hold out a validation row and train on the rest; give at "
              "least 2"),
])
def test_too_few_rows_are_counted_as_the_file_has_them(rows, test, message, tmp_path, capsys):
    data = tmp_path / "pairs.tsv"
    data.write_text("source\ttarget\n" + "le\tthe\nun\ta\n"[: 7 * rows], encoding="utf-8")
    (tmp_path / "test.tsv").write_text("source\ttarget\nthé\ttea\n", encoding="utf-8")
    extra = ["--test", str(tmp_path / "test.tsv")] if test else []
    out = tmp_path / "run"
    assert main(["train", "translate", "--data", str(data), *extra, "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip() == f"attnlab: error: --data {data} {message}"
    assert not out.exists()


@pytest.mark.slow
@pytest.mark.parametrize("by_length", [False, True])
def test_evaluate_names_the_line_of_a_source_too_long_for_the_model(translate_run, tmp_path,
                                                                    capsys, by_length):
    data = tmp_path / "pairs.tsv"
    data.write_text("source\ttarget\nle café\tthe coffee\n" + " ".join(["café"] * 100) + "\t"
                    + " ".join(["coffee"] * 100) + "\n", encoding="utf-8")
    capsys.readouterr()
    figure = ["--by-length", "--out", str(tmp_path / "by_length.png")] if by_length else []
    assert main(["evaluate", str(translate_run), "--data", str(data), *figure]) == 2
    assert capsys.readouterr().err == (f"attnlab: error: --data {data} line 3 has 100 tokens; "
                                       f"this model reads at most 64\n")


@pytest.mark.slow
@pytest.mark.parametrize("command", [["view"], ["plot", "attention"]])
def test_a_picture_of_an_input_too_long_for_the_model_is_refused_naming_input(
        translate_run, tmp_path, capsys, command):
    capsys.readouterr()
    out = tmp_path / ("page.html" if command == ["view"] else "attention.png")
    assert main([*command, str(translate_run), "--input", " ".join(["café"] * 100),
                 "--out", str(out)]) == 2
    assert capsys.readouterr().err == ("attnlab: error: --input has 100 tokens; this model reads "
                                       "at most 64\n")
    assert not out.exists()


@pytest.mark.slow
def test_a_run_from_before_normalising_resumes_with_the_ids_it_trained_on(tmp_path, monkeypatch,
                                                                          capsys):
    """A run started before attnlab normalised: tokenisers fit on text as given, no
    ``normalize`` in config.yaml. ``--resume`` fits them again as they were."""
    from attnlab.tokenizers import WordTokenizer

    rng = random.Random(2)
    rows = []
    for i in range(200):  # half the sources typed decomposed (NFD), as on a Mac
        words = [rng.choice(list(FRENCH)) for _ in range(rng.randint(1, 3))]
        source = " ".join(words)
        rows.append((nfd(source) if i % 2 else source) + "\t" + " ".join(FRENCH[w] for w in words))
    data = tmp_path / "pairs.tsv"
    data.write_text("source\ttarget\n" + "\n".join(rows) + "\n", encoding="utf-8")
    fit = WordTokenizer.fit.__func__
    with monkeypatch.context() as m:  # the earlier attnlab: text as given
        m.setattr(WordTokenizer, "fit", classmethod(
            lambda cls, texts, **options: fit(cls, texts, **{**options, "normalize": None})))
        out = tmp_path / "run"
        assert main(["train", "translate", "--data", str(data), "--src-tokenizer", "word",
                     "--tgt-tokenizer", "word", "--out", str(out), "--max-steps", "10",
                     "--checkpoint-every", "5", *TINY]) == 0
    cfg = read_yaml(out / "config.yaml")
    cfg.pop("normalize", None)  # none before this attnlab
    write_yaml(out / "config.yaml", cfg)
    before = attnlab.load(out)[1].src
    capsys.readouterr()
    (tmp_path / "nfc.yaml").write_text("normalize: NFC\n")
    assert main(["train", "translate", "--out", str(out), "--resume", "--max-steps", "20",
                 "--config", str(tmp_path / "nfc.yaml")]) == 2
    # normalize has no flag: it was named "--normalize NFC (the run has None)"
    assert capsys.readouterr().err.startswith(
        f"attnlab: error: --resume: normalize: NFC in --config {tmp_path / 'nfc.yaml'} (the "
        f"run has none) — a run continues with the settings of {out}/config.yaml: drop the "
        f"setting, ")
    assert main(["train", "translate", "--out", str(out), "--resume", "--max-steps", "20"]) == 0
    after = attnlab.load(out)[1].src
    assert after.normalize is None and after.pieces == before.pieces
    assert json.loads((out / "metrics.json").read_text())["steps"] == 20


def test_a_config_file_naming_no_normal_form_is_refused_before_the_run(tmp_path, capsys):
    (tmp_path / "c.yaml").write_text("normalize: nfc\n")
    out = tmp_path / "run"
    assert main(["train", "translate", "--config", str(tmp_path / "c.yaml"), "--out",
                 str(out)]) == 2
    assert capsys.readouterr().err == (f"attnlab: error: --config {tmp_path / 'c.yaml'}: "
                                       f"normalize must be one of NFC, NFD, NFKC, NFKD, or "
                                       f"null, got 'nfc'\n")
    assert not out.exists()


@pytest.mark.slow
def test_sources_the_word_tokenizer_cannot_split_are_named(tmp_path, capsys):
    """Chinese written without spaces is one "word" per sentence to --src-tokenizer word:
    held-out sentences were all unk, without a word said."""
    rng = random.Random(3)
    chinese = {"我": "i", "你": "you", "喜欢": "like", "茶": "tea", "咖啡": "coffee"}
    rows = []
    for _ in range(200):
        words = [rng.choice(list(chinese)) for _ in range(rng.randint(2, 5))]
        rows.append("".join(words) + "\t" + " ".join(chinese[w] for w in words))
    data = tmp_path / "pairs.tsv"
    data.write_text("source\ttarget\n" + "\n".join(rows) + "\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["train", "translate", "--data", str(data), "--src-tokenizer", "word",
                 "--tgt-tokenizer", "word", "--out", str(tmp_path / "run"), "--max-steps", "1",
                 *TINY]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines()
             if line.startswith("note: ") and "unk" in line]
    assert len(notes) == 1 and "of the test sources are unk" in notes[0], notes


def _check_files(**settings):
    from attnlab.tasks import get_task
    from attnlab.tasks.translate.data import check_files

    return check_files(get_task("translate").config(**settings))


def test_held_out_pairs_that_a_training_row_repeats_are_warned_of(tmp_path, capsys):
    """A file that repeats its rows (30 pairs, 4 times each) puts copies of most held-out pairs
    in the training split: the test scores were of sentences the model learnt, without a word."""
    pairs = [(f"the cat number {n}", f"le chat numéro {n}") for n in range(30)]
    data = tmp_path / "pairs.tsv"
    data.write_text("source\ttarget\n" + "".join(f"{s}\t{t}\n" for s, t in pairs * 4),
                    encoding="utf-8")
    capsys.readouterr()
    _check_files(data=str(data))
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2, err
    for line, part in zip(err, ("validation", "test"), strict=True):
        assert line.startswith(f"warning: the {part} rows of --data {data}: ")
        assert "rows have an input that a training row has too (first: line " in line
        assert line.endswith("so its scores are partly of inputs the model trained on")
    # the same rows given once each: nothing held out is trained on, nothing said
    data.write_text("source\ttarget\n" + "".join(f"{s}\t{t}\n" for s, t in pairs),
                    encoding="utf-8")
    _check_files(data=str(data))
    assert capsys.readouterr().err == ""


def test_a_test_file_cut_from_the_data_file_is_warned_of(tmp_path, capsys):
    """--test holds a new pair and the 20 rows of --data, typed with decomposed accents (the
    tokeniser reads them as the same text): all but the 2 that validate are trained on."""
    rows = "".join(f"the café number {n}\tle café numéro {n}\n" for n in range(20))
    (tmp_path / "pairs.tsv").write_text("source\ttarget\n" + rows, encoding="utf-8")
    (tmp_path / "test.tsv").write_text("source\ttarget\nthe dog\tle chien\n" + nfd(rows),
                                       encoding="utf-8")
    capsys.readouterr()
    _check_files(data=str(tmp_path / "pairs.tsv"), test=str(tmp_path / "test.tsv"))
    err = capsys.readouterr().err
    assert err.startswith(f"warning: --test {tmp_path / 'test.tsv'}: 18 of its 21 rows have an "
                          f"input that a training row has too (first: line "), err
    assert err.count("\n") == 1 and "line 2)" not in err  # line 2, the dog, is new


@pytest.mark.slow
@pytest.mark.parametrize("by_length", [False, True])
def test_evaluate_data_warns_of_sources_the_run_trained_on(translate_run, tmp_path, capsys,
                                                         by_length):
    """``evaluate --data`` of the training file scored sentences the model learnt, as if new."""
    own = translate_run.parent / "pairs.tsv"
    rows = own.read_text(encoding="utf-8").splitlines()[1:]
    new = "élève élève élève élève élève\tpupil pupil pupil pupil pupil\n"
    data = tmp_path / "eval.tsv"  # a new sentence (line 2), then the run's own rows in NFD
    data.write_text("source\ttarget\n" + new + nfd("\n".join(rows)) + "\n", encoding="utf-8")
    fresh = tmp_path / "fresh.tsv"
    fresh.write_text("source\ttarget\n" + new, encoding="utf-8")
    capsys.readouterr()
    for path, figure in ((data, "a.png"), (fresh, "b.png")):
        flags = ["--by-length", "--out", str(tmp_path / figure)] if by_length else []
        assert main(["evaluate", str(translate_run), "--data", str(path), *flags]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and warnings[0].startswith(f"warning: --data {data}: "), warnings
    shared = int(warnings[0].split(": ")[2].split(" of its ")[0])
    assert 320 <= shared < 400 and f"of its {len(rows) + 1} rows" in warnings[0]
    assert "(first: line 2)" not in warnings[0]
