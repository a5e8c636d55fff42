"""`attnlab train classify` data errors: exit 2, one line naming file/column/line, no traceback,
and no run directory left behind."""
import re
import subprocess
import sys

import pytest

from attnlab.cli import main

GOOD = "text,label\n" + "".join(f"text number {i},{'ab'[i % 2]}\n" for i in range(40))


def files(tmp_path, **contents):
    paths = {}
    for name, content in contents.items():
        path = tmp_path / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        paths[name] = str(path)
    return paths


CASES = {
    "missing file": (dict(), ["--data", "{tmp}/nope.csv"], r"--data: file not found: .*nope.csv"),
    "missing column": (dict(d_csv="body,label\nhi,a\n"), ["--data", "{d_csv}"],
                       r"--data .*d.csv: no column 'text' \(columns: body, label\)"),
    "missing custom column": (dict(d_csv=GOOD), ["--data", "{d_csv}", "--label-column", "topic"],
                              r"--data .*d.csv: no column 'topic' \(columns: text, label\)"),
    "empty file": (dict(d_csv=""), ["--data", "{d_csv}"], r"--data .*d.csv: the file is empty"),
    "undecodable bytes": (dict(d_csv=GOOD.encode() + b"caf\xe9 au lait,a\n"), ["--data", "{d_csv}"],
                          r"--data .*d.csv line 42: not valid UTF-8 \(byte 0xe9 at column 4\)"),
    "single class": (dict(d_jsonl='{"text": "x", "label": "a"}\n' * 5), ["--data", "{d_jsonl}"],
                     r"--data .*d.jsonl: column 'label' has a single class \('a'\)"),
    "unseen test label": (dict(d_csv=GOOD, t_csv="text,label\nfine,a\nnew one,c\n"),
                          ["--data", "{d_csv}", "--test", "{t_csv}"],
                          r"--test .*t.csv line 3: label 'c' never seen in training \(labels: a, b\)"),
    "bad test file bytes": (dict(d_csv=GOOD, t_tsv=b"text\tlabel\n\xff\ta\n"),
                            ["--data", "{d_csv}", "--test", "{t_tsv}"],
                            r"--test .*t.tsv line 2: not valid UTF-8 \(byte 0xff at column 1\)"),
    "no data flag": (dict(), [], r"--data FILE is required"),
    "too few rows to hold out": (dict(d_csv="text,label\nx,a\ny,b\n"), ["--data", "{d_csv}"],
                                 r"--data .*d.csv: too few rows \(2\) to hold out a test split"),
    "fractions leave nothing": (dict(d_csv=GOOD), ["--data", "{d_csv}", "--val-fraction", "0.5",
                                                    "--test-fraction", "0.5"],
                                r"--val-fraction \(0.5\) \+ --test-fraction \(0.5\) must be < 1"),
    "bpe vocabulary too small": (dict(d_csv=GOOD), ["--data", "{d_csv}", "--tokenizer", "bpe",
                                                     "--vocab-size", "100"],
                                 r"--vocab-size must be an integer >= 260 for --tokenizer bpe, got 100"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_data_errors_exit_2_with_one_line_and_no_run_directory(tmp_path, capsys, case):
    contents, argv, message = CASES[case]
    paths = files(tmp_path, **{k.replace("_", "."): v for k, v in contents.items()})
    names = {k.replace(".", "_"): v for k, v in paths.items()} | {"tmp": str(tmp_path)}
    out = tmp_path / "run"
    code = main(["train", "classify", "--out", str(out), *[a.format(**names) for a in argv]])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("attnlab: error: ")
    assert re.search(message, err), err
    assert not out.exists()


@pytest.mark.slow
def test_the_real_process_exits_2_without_a_traceback(tmp_path):
    data = tmp_path / "d.csv"
    data.write_bytes(GOOD.encode() + b"\xff\xfe,b\n")
    proc = subprocess.run([sys.executable, "-m", "attnlab", "train", "classify", "--data", str(data),
                           "--out", str(tmp_path / "run")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"attnlab: error: --data {data} line 42: not valid UTF-8 (byte 0xff at column 1); "
        f"save the file as UTF-8"]
