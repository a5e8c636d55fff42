"""A large corpus for ``train lm --init FILE.gguf`` is tokenised once with ``attnlab prepare
FILE... --tokenizer FILE.gguf``, as for a directory (prepare refused a .gguf file, "not ... a
directory", while ``--init FILE.gguf --data CORPUS`` takes only a corpus made with the file's
tokenizer). The tiny GPT-2 GGUF file of ``test_gguf``."""
import json

import numpy as np

from attnlab.cli import main
from attnlab.commands.train import configure

from .conftest import transformers
from .test_gguf import files  # noqa: F401 (a fixture)

TEXT = "the cat sat on the mat. a dog ran fast! hello world, hello there\n" * 40


def test_prepare_takes_a_gguf_files_tokenizer_and_init_trains_on_the_corpus(files, tmp_path):
    text = tmp_path / "text.txt"
    text.write_text(TEXT, encoding="utf-8")
    corpus = tmp_path / "corpus"
    assert main(["prepare", str(text), "--tokenizer", str(files["f32"]),
                 "--out", str(corpus)]) == 0
    theirs = transformers.AutoTokenizer.from_pretrained(files["dir"],
                                                        gguf_file=files["f32"].name)
    first = theirs(TEXT[:300])["input_ids"][:30]
    dtype = json.loads((corpus / "meta.json").read_text())["dtype"]
    assert np.fromfile(corpus / "train.bin", dtype=dtype)[:30].tolist() == first
    cfg = configure("lm", {"init": str(files["f32"]), "data": str(corpus),
                           "out": str(tmp_path / "run"), "block_size": 16})[0]
    assert cfg.tokenizer == "hf" and cfg.init == str(files["f32"].resolve())


def test_prepare_names_what_tokenizer_takes(tmp_path, capsys):
    (tmp_path / "t.txt").write_text(TEXT)
    assert main(["prepare", str(tmp_path / "t.txt"), "--tokenizer", "no-such.gguf",
                 "--out", str(tmp_path / "c")]) == 2
    assert "nor a directory (a Hugging Face model directory or an attnlab lm run) or a .gguf " \
           "file" in capsys.readouterr().err
    assert not (tmp_path / "c").exists()
