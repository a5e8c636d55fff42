"""A damaged ``.gguf`` file: one cut short (an interrupted download or copy) and one with a
tensor type id the ``gguf`` reader does not know (a newer llama.cpp's). Both are refused in one
line naming the file and the tensor, before a run directory is written, where ``gguf``'s own
reader fails with numpy's words about a reshape or an enum.

The files are written here with ``gguf.GGUFWriter``: their header alone is read before the
refusal, so a few small tensors and no model stand for a real file.
"""
import numpy as np
import pytest

from attnlab.cli import main

gguf = pytest.importorskip("gguf")


def _write(path):
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(1)
    for name in ("token_embd.weight", "blk.0.attn_q.weight", "output_norm.weight"):
        w.add_tensor(name, np.ones((8, 64) if name.endswith("q.weight") else (64,), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _refused(capsys, argv, *parts, out):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    for part in parts:
        assert part in err, err
    assert not out.exists()


def _argvs(path, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat on the mat.\n" * 20, encoding="utf-8")
    return [["generate", str(path), "--prompt", "hi"],
            ["train", "lm", "--init", str(path), "--data", str(corpus),
             "--out", str(tmp_path / "run")]]


def test_a_file_cut_short_names_the_tensor_it_ends_in(tmp_path, capsys):
    path = _write(tmp_path / "whole.gguf")
    data = path.read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[:-100])  # into output_norm.weight, the last tensor
    for argv in _argvs(cut, tmp_path):
        _refused(capsys, argv, str(cut), "is cut short", "tensor output_norm.weight",
                 f"the file has {len(data) - 100:,} bytes", out=tmp_path / "run")


def test_a_tensor_of_a_type_id_gguf_does_not_know_is_named(tmp_path, capsys):
    path = _write(tmp_path / "new-type.gguf")
    reader = gguf.GGUFReader(path, "r+")
    (q,) = [t for t in reader.tensors if t.name == "blk.0.attn_q.weight"]
    q.field.parts[4][0] = 250  # its type id, in the header (memory-mapped for writing)
    reader.data.flush()
    del reader, q
    for argv in _argvs(path, tmp_path):
        _refused(capsys, argv, str(path), "tensor blk.0.attn_q.weight", "type id 250",
                 "the gguf reader does not know", out=tmp_path / "run")
