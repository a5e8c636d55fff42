"""``attnlab train classify --init DIR`` of a pytorch_model.bin: its checks (``read_init_source``)
and the reading of the checkpoint (``read_init``) take the SHA-256 of the weights once, not
once each (each pass over a BERT-base file is about a second); a file changed in between is
still read again and refused. Tiny random BERT (``test_checkpoint``'s builder)."""
import os
import time

import pytest
import torch
from safetensors.torch import load_file

from .conftest import transformers  # noqa: F401  (skips without the hf extra)

import attnlab.interop.source as source_module  # noqa: E402
from attnlab.errors import UsageError  # noqa: E402
from attnlab.interop.source import read_init_source  # noqa: E402
from attnlab.tasks.classify.pretrained import read_init  # noqa: E402
from tests.interop.test_checkpoint import save_bert  # noqa: E402


@pytest.fixture
def bert_bin(tmp_path):
    d = save_bert(tmp_path / "bert")
    torch.save(load_file(d / "model.safetensors"), d / "pytorch_model.bin")
    (d / "model.safetensors").unlink()
    _settle(d / "pytorch_model.bin")
    return d


def _settle(path, mtime_ns=None):
    """Set ``path``'s mtime to ``mtime_ns`` (default: a minute ago, so a digest may be kept)."""
    t = time.time_ns() - 60 * 10**9 if mtime_ns is None else mtime_ns
    os.utime(path, ns=(t, t))


def _spy(monkeypatch):
    read = []
    digest = source_module.file_digest

    def spy(path):
        read.append(os.path.basename(path))
        return digest(path)

    monkeypatch.setattr(source_module, "file_digest", spy)
    return read


def test_the_weights_digest_is_taken_once_from_the_checks_to_the_model(bert_bin, monkeypatch):
    read = _spy(monkeypatch)
    found = read_init_source(bert_bin, task="classify", model_types=("bert",))
    checkpoint = read_init(str(bert_bin), found.sha256)
    assert checkpoint.sha256 == found.sha256
    assert read == ["pytorch_model.bin"]


def test_weights_rewritten_after_the_checks_are_read_again_and_refused(bert_bin, monkeypatch):
    read = _spy(monkeypatch)
    found = read_init_source(bert_bin, task="classify", model_types=("bert",))
    tensors = torch.load(bert_bin / "pytorch_model.bin", weights_only=True)
    tensors["pooler.dense.bias"] += 1  # the same size: only the bytes tell
    torch.save(tensors, bert_bin / "pytorch_model.bin")
    with pytest.raises(UsageError, match="pytorch_model.bin changed since the run was configured"):
        read_init(str(bert_bin), found.sha256)
    assert read == ["pytorch_model.bin"] * 2


def test_a_same_size_rewrite_within_a_coarse_timestamp_is_read_again(bert_bin, monkeypatch):
    # a filesystem that counts whole seconds (ext3, HFS+, NFS): a file rewritten in the second
    # it was read keeps its size and every time stat shows; ctime cannot be set back here, so
    # the stat is made to leave it out
    stat = source_module.file_stat
    monkeypatch.setattr(source_module, "file_stat", lambda p: stat(p)[:5])
    weights = bert_bin / "pytorch_model.bin"
    now = time.time_ns()
    _settle(weights, now)
    found = read_init_source(bert_bin, task="classify", model_types=("bert",))
    tensors = torch.load(weights, weights_only=True)
    tensors["pooler.dense.bias"] += 1
    torch.save(tensors, weights)
    _settle(weights, now)
    with pytest.raises(UsageError, match="pytorch_model.bin changed since the run was configured"):
        read_init(str(bert_bin), found.sha256)
