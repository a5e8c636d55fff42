"""Without the gguf package, ``--init FILE.gguf`` and ``generate FILE.gguf`` say which flag
and file needed it and the pip command, in one line, before a run directory exists (the
message named the package alone, not what asked for it)."""
import sys

import pytest

from attnlab.cli import main


@pytest.fixture
def no_gguf(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "gguf", None)  # import gguf raises ImportError
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF")
    return path


def test_init_of_a_gguf_file_names_the_flag_the_file_and_the_install(no_gguf, tmp_path, capsys):
    data = tmp_path / "lm.txt"
    data.write_text("hello world\n" * 20)
    out = tmp_path / "run"
    assert main(["train", "lm", "--init", str(no_gguf), "--data", str(data), "--out",
                 str(out)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"attnlab: error: --init {no_gguf}: reading a GGUF file needs the gguf package, which "
        f"is not installed: pip install 'attnlab[hf]'")
    assert not out.exists()


def test_generate_of_a_gguf_file_names_the_file(no_gguf, capsys):
    assert main(["generate", str(no_gguf), "--prompt", "hi"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"attnlab: error: {no_gguf}") and "pip install 'attnlab[hf]'" in err
    assert len(err.splitlines()) == 1
