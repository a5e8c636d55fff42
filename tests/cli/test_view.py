"""`attnlab view`: the interactive attention page of a run of every task — the page's embedded
data is the model's attention on that input, with the tokens a user reads — and its errors
(exit 2, one line, nothing written) and `--serve`."""
import os
import re
import signal
import subprocess
import sys
import urllib.request

import pytest
import torch

from attnlab.cli import main
from attnlab.explorer import read_data
from attnlab.runs import read_yaml
from attnlab.tasks import get_task

pytestmark = pytest.mark.slow


def view(capsys, *argv) -> tuple[int, str, str]:
    code = main(["view", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("name", ["reverse", "anomaly", "classify", "sets", "lm", "jets"])
def test_the_page_holds_the_runs_attention_on_the_input(run_copy, name, capsys):
    run, text = run_copy(name)  # the page is written into the run
    code, out, _ = view(capsys, run, "--input", text)
    page = run / "attention.html"
    assert code == 0 and out.strip().splitlines()[-1] == str(page)
    data = read_data(page.read_text(encoding="utf-8"))
    cfg = read_yaml(run / "config.yaml")
    task = get_task(cfg["task"])
    maps, keys, queries = task.runtime().attention_maps(task, run, task.typed(cfg, run), text)
    if name == "jets":  # the PNG's maps keep the 20 hardest; the page has every constituent
        assert len(data["query_tokens"]) >= len(queries)
        data["layers"] = [{**layer, "weights": [[row[: len(keys)] for row in head[: len(queries)]]
                                                for head in layer["weights"]]}
                          for layer in data["layers"]]
        data["query_tokens"] = data["query_tokens"][: len(queries)]
    assert data["task"] == cfg["task"] and data["run"] == str(run)
    assert data["query_tokens"] == list(queries) and len(data["layers"]) == len(maps)
    for layer, expected in zip(data["layers"], maps):
        assert layer["kind"] == ("causal" if name == "lm" else "self")
        # the page holds 4 decimals, rounded in float32: off by half the last decimal plus
        # float32's rounding of a number below 1 (< 1.2e-7; 5.0000846e-05 was seen)
        torch.testing.assert_close(torch.tensor(layer["weights"]), expected.float(),
                                   atol=5e-5 + 2e-7, rtol=0)


@pytest.mark.parametrize("name", ["reverse", "anomaly", "classify", "sets", "lm", "jets",
                                  "translate", "graph"])
def test_every_tasks_page_holds_the_text_json_dumps_writes(runs, name, tmp_path, capsys):
    """The page's data is written from NumPy arrays, not by json.dumps (33 MB took seconds):
    byte for byte what json.dumps writes of the same data, on a page of every task."""
    import json

    run, text = runs[name]
    out = tmp_path / "page.html"
    assert view(capsys, run, "--input", text, "--out", out)[0] == 0
    page = out.read_text(encoding="utf-8")
    start = page.index('id="attnlab-attention">') + len('id="attnlab-attention">')
    embedded = page[start:page.index("</script>", start)]
    dumped = json.dumps(read_data(page), allow_nan=False, ensure_ascii=False,
                        separators=(",", ":"))
    assert embedded == dumped.replace("&", "\\u0026").replace("<", "\\u003c").replace(
        ">", "\\u003e")


def test_classify_and_set_tokens_read_as_the_user_wrote_them(runs, tmp_path, capsys):
    for name, expected in (("classify", ["[CLS]", "the", "film", "was", "great"]),
                           ("sets", ["0:(0.5,1)", "1:(-1,2)", "2:(0,0)"])):  # mean-pooled
        run, text = runs[name]
        out = tmp_path / f"{name}.html"
        assert view(capsys, run, "--input", text, "--out", out)[0] == 0
        tokens = read_data(out.read_text())["query_tokens"]  # word pieces keep their space
        assert [t.strip() for t in tokens] == expected


def test_translate_page_has_encoder_decoder_and_cross_groups(runs, tmp_path, capsys):
    run, text = runs["translate"]
    out = tmp_path / "t.html"
    assert view(capsys, run, "--input", text, "--out", out)[0] == 0
    data = read_data(out.read_text())
    cfg = read_yaml(run / "config.yaml")
    task = get_task("translate")
    cross, source, target = task.runtime().attention_maps(task, run, task.typed(cfg, run), text)
    groups = [layer["group"] for layer in data["layers"]]
    assert sorted(set(groups)) == ["cross", "decoder", "encoder"]
    assert data["query_tokens"] == data["key_tokens"] == source
    for layer in data["layers"]:
        kind = {"encoder": "self", "decoder": "causal", "cross": "cross"}[layer["group"]]
        assert layer["kind"] == kind
        heads = torch.tensor(layer["weights"])
        if layer["group"] == "cross":
            assert layer["query_tokens"] == target and layer["key_tokens"] == source
            assert heads.shape[1:] == (len(target), len(source))
        elif layer["group"] == "decoder":
            assert heads.shape[1:] == (len(target), len(target))
            assert torch.triu(heads, 1).abs().max() == 0  # no token sees a later one
        else:
            assert heads.shape[1:] == (len(source), len(source))
    crosses = [torch.tensor(layer["weights"]) for layer in data["layers"]
               if layer["group"] == "cross"]
    for got, expected in zip(crosses, cross, strict=True):
        torch.testing.assert_close(got, expected.float(), atol=5e-5, rtol=0)
    assert all(" " not in t.strip() or len(t) < 20 for t in source)  # words, not run together


def test_user_errors_exit_2_with_one_line_and_write_nothing(runs, tmp_path, capsys):
    run, text = runs["reverse"]
    before = sorted(p.name for p in run.iterdir())
    cases = [
        ((tmp_path / "nope", "--input", text), "nope"),
        ((run, "--input", "  "), "--input"),
        ((run, "--input", text, "--out", tmp_path / "page.png"), "--out"),
        ((run, "--input", text, "--out", tmp_path), "--out"),
        ((run, "--input", text, "--port", "8000"), "--port"),
        ((run, "--input", text, "--serve", "--port", "70000"), "--port"),
        ((run, "--input", "3 1 99"), "99"),
    ]
    for argv, named in cases:
        code, out, err = view(capsys, *argv)
        assert code == 2 and named in err and len(err.strip().splitlines()) == 1, (argv, err)
        assert "Traceback" not in err
    assert sorted(p.name for p in run.iterdir()) == before
    assert not (tmp_path / "page.png").exists()


def test_a_run_whose_attention_is_not_finite_exits_2_naming_the_head_and_query(run_copy,
                                                                               capsys):
    """A diverged run (NaN weights) ended `attnlab view` with a traceback and exit status 1."""
    from safetensors.torch import load_file, save_file

    run, text = run_copy("reverse")
    weights = load_file(run / "model.safetensors")
    name = next(k for k in weights if "qkv_proj.weight" in k)
    weights[name] = torch.full_like(weights[name], float("nan"))
    save_file(weights, run / "model.safetensors")
    code, out, err = view(capsys, run, "--input", text)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "head 0, query 0" in err and "not finite" in err
    assert not (run / "attention.html").exists()


def test_a_directory_given_as_out_is_answered_with_a_page_name(runs, tmp_path, capsys):
    """view --out DIR suggested "DIR/figure.png" for an HTML page."""
    run, text = runs["reverse"]
    code, _, err = view(capsys, run, "--input", text, "--out", tmp_path)
    assert code == 2 and err.strip().endswith(f"e.g. {tmp_path / 'figure.html'}"), err


def test_an_lm_input_with_characters_the_model_lacks_is_noted(runs, tmp_path, capsys):
    """predict and generate say which pieces were read as unknown; view (and plot attention)
    of an lm run said nothing."""
    run, _ = runs["lm"]
    code, out, err = view(capsys, run, "--input", "the qu§ck fox", "--out",
                          tmp_path / "unknown.html")
    assert code == 0
    assert "note: --input holds pieces unknown to this model, each read as unk: '§'" in err


def test_a_classify_input_with_words_the_model_lacks_is_noted(runs, tmp_path, capsys):
    """view and plot attention of a classify run labelled a word the model read as unk with
    the word itself ('zebra'), where predict says it was read as unk."""
    run, _ = runs["classify"]
    code, _, err = view(capsys, run, "--input", "the zebra was great", "--out",
                        tmp_path / "unknown.html")
    assert code == 0
    assert err == "note: --input holds pieces unknown to this model, each read as unk: 'zebra'\n"
    assert main(["plot", "attention", str(run), "--input", "the zebra was great", "--out",
                 str(tmp_path / "unknown.png")]) == 0
    assert capsys.readouterr().err == err
    assert view(capsys, run, "--input", "the film was great", "--out",
                tmp_path / "known.html")[2] == ""  # every word known: no note


def test_a_translate_input_with_words_the_model_lacks_is_noted(runs, tmp_path, capsys):
    """view and plot attention of a translate run labelled a source word the model read as unk
    with the word itself ('zillion'), where translate and predict say it was read as unk."""
    run, _ = runs["translate"]
    note = "note: --input holds pieces unknown to this model, each read as unk: 'zillion'\n"
    code, _, err = view(capsys, run, "--input", "three hundred zillion", "--out",
                        tmp_path / "unknown.html")
    assert code == 0 and err.endswith(note), err
    assert main(["plot", "attention", str(run), "--input", "three hundred zillion", "--out",
                 str(tmp_path / "unknown.png")]) == 0
    assert capsys.readouterr().err.endswith(note)


def test_an_earlier_page_is_replaced_only_when_named(run_copy, capsys):
    run, text = run_copy("reverse")  # the earlier page is the run's own
    page = run / "attention.html"
    page.write_text("mine")
    code, _, err = view(capsys, run, "--input", text)
    assert code == 2 and str(page) in err and "--out" in err
    assert page.read_text() == "mine"
    assert view(capsys, run, "--input", text, "--out", page)[0] == 0
    assert read_data(page.read_text())["layers"]


def test_the_page_says_which_weights_and_what_the_run_reached(run_copy, capsys):
    """A reader comparing runs saw each run's attention but not its metrics nor the step of
    its weights. The page now holds metrics.json's numbers as the file holds them and the
    step; a run whose metrics.json is missing says so, not a page like a finished run's."""
    import json

    run, text = run_copy("reverse")
    metrics = json.loads((run / "metrics.json").read_text())
    assert view(capsys, run, "--input", text)[0] == 0
    record = read_data((run / "attention.html").read_text(encoding="utf-8"))["record"]
    assert record["metrics"] == metrics  # every value a number or text: none left out
    assert record["weights"] == {"file": "model.safetensors", "step": metrics["steps"],
                                 "steps": metrics["steps"], "which": "last"}
    assert record["shown"]["weights"] == (f"model.safetensors: step {metrics['steps']} of "
                                          f"{metrics['steps']}, the last step")
    assert ["test_token_accuracy", json.dumps(metrics["test_token_accuracy"])] in \
        record["shown"]["metrics"]
    (run / "metrics.json").unlink()
    out = run / "without.html"
    assert view(capsys, run, "--input", text, "--out", out)[0] == 0
    record = read_data(out.read_text(encoding="utf-8"))["record"]
    assert record["metrics"] is None and record["weights"]["step"] is None
    assert record["note"].startswith(f"no metrics yet: {run}/metrics.json is not written")


def test_a_one_token_lm_page_is_causal_as_the_figure_says(runs, tmp_path, capsys):
    """A one-token lm input's 1 x 1 maps cannot show their mask: the page called them
    "self-attention" while `plot attention` of the same input titled them causal."""
    run, _ = runs["lm"]
    out = tmp_path / "one.html"
    assert view(capsys, run, "--input", "t", "--out", out)[0] == 0
    layers = read_data(out.read_text(encoding="utf-8"))["layers"]
    assert layers and {(layer["kind"], layer["group"]) for layer in layers} == {
        ("causal", "causal")}


def stop(proc, signum=signal.SIGINT) -> tuple[int, str, str]:
    """Sends ``signum`` (Ctrl-C) and returns the exit status, stdout and stderr. A process still
    running 20 s later fails the test with what each of its threads was doing then (Python's
    faulthandler, which ``PYTHONFAULTHANDLER`` turns on, prints them on SIGABRT): a server that
    does not stop is a bug to be read, not a wait to be lengthened."""
    proc.send_signal(signum)
    try:
        out, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        out, err = proc.communicate(timeout=20)
        pytest.fail(f"still serving 20 s after {signum.name}; its threads were:\n{err}")
    return proc.returncode, out, err


def serve(spawn, run, text, out, **kwargs):
    """``attnlab view RUN --input TEXT --out OUT --serve``: (the process, the page's URL match,
    the "serving" line)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONFAULTHANDLER="1")
    proc = spawn([sys.executable, "-m", "attnlab", "view", str(run), "--input", text, "--out",
                  str(out), "--serve"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                 text=True, env=env, **kwargs)
    assert proc.stdout.readline().strip() == str(out)
    line = proc.stdout.readline()
    url = re.search(rf"http://127\.0\.0\.1:(\d+)/{out.name}", line)
    assert url, line
    return proc, url, line


def test_serve_serves_the_page_until_ctrl_c(runs, tmp_path, spawn):
    """Only the page is served, and Ctrl-C stops the server whatever clients hold connections
    open: one connected that never sends a request (as a browser's preconnect) and one whose
    response was read."""
    import socket

    run, text = runs["reverse"]
    out = tmp_path / "served.html"
    proc, url, line = serve(spawn, run, text, out)
    assert "(Ctrl-C stops)" in line
    with urllib.request.urlopen(url.group(0), timeout=10) as response:
        assert response.status == 200 and response.read() == out.read_bytes()
    with pytest.raises(urllib.error.HTTPError) as refused:  # the run's other files are not served
        urllib.request.urlopen(url.group(0).replace("served.html", "model.safetensors"),
                               timeout=10)
    assert refused.value.code == 404
    refused.value.close()
    with socket.create_connection(("127.0.0.1", int(url.group(1))), timeout=10) as idle, \
            urllib.request.urlopen(url.group(0), timeout=10) as held:
        held.read()
        code, rest, err = stop(proc)
        idle.close()
    assert code == 0, err
    assert rest.strip() == "stopped"


def test_serve_started_with_ctrl_c_ignored_says_so_and_stops_on_sigterm(runs, tmp_path, spawn):
    """A server started as a background job (SIGINT ignored, which Python keeps) does not claim
    that Ctrl-C stops it: it names the kill command, and SIGTERM stops it as Ctrl-C would."""
    run, text = runs["reverse"]
    proc, _, line = serve(spawn, run, text, tmp_path / "bg.html", ctrl_c=False)
    assert "Ctrl-C stops" not in line
    assert "Ctrl-C is ignored by this process" in line and f"kill {proc.pid} stops it" in line
    code, rest, err = stop(proc, signal.SIGTERM)
    assert code == 0, err
    assert rest.strip() == "stopped"


def test_view_never_imports_lightning(runs, tmp_path):
    run, text = runs["reverse"]
    code = ("import sys\nfrom attnlab.cli import main\n"
            f"assert main(['view', {str(run)!r}, '--input', {text!r}, '--out', "
            f"{str(tmp_path / 'p.html')!r}]) == 0\n"
            "assert 'lightning' not in sys.modules and 'pytorch_lightning' not in sys.modules\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
