"""Every model the tasks train, tiny, in train mode with dropout, with one batch and its loss:
the cases of ``test_compile_clean.py`` (one graph under torch.compile) and ``test_cuda_sync.py``
(no host synchronisation in a training step).

Each model comes from its task's own builder (``attnlab.tasks.NAME.runtime.build_model``) on the
task's defaults with small sizes, so the cases are what ``attnlab train TASK`` trains. The
losses are the training step's: ``lm_loss`` and ``seq2seq_loss`` are called from
``attnlab.training``; the classifier's and the predictor's are the cross-entropy their modules
compute; the graph task's is its training step, ``graph_step`` (loss and accuracy).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.tasks import SHARED_DEFAULTS, get_task
from attnlab.training.graph import graph_step
from attnlab.training.lm import lm_loss
from attnlab.training.seq2seq import seq2seq_loss

TINY = {"model_dim": 16, "num_heads": 2, "num_layers": 2, "dim_feedforward": 32, "dropout": 0.1}
B, T = 3, 10  # batch and length of every batch below


@dataclass(frozen=True)
class Case:
    """One model the CLI trains: ``build()`` gives it (train mode), ``batch(device)`` a batch
    of its training data, ``loss(model, batch)`` the training step's loss (a scalar)."""

    name: str
    build: Callable[[], nn.Module]
    batch: Callable[[torch.device], tuple]
    loss: Callable[[nn.Module, tuple], Tensor]

    def model(self, device: torch.device | str = "cpu") -> nn.Module:
        torch.manual_seed(0)
        return self.build().to(device).train()


def _cfg(task: str, **values: Any):
    """A run configuration of ``task``: its defaults, tiny sizes, then ``values``."""
    return get_task(task).config(**{**SHARED_DEFAULTS, **get_task(task).defaults, **TINY,
                                    **values})


def _generator() -> torch.Generator:
    return torch.Generator().manual_seed(0)


def _padded_ids(vocab: int, device, *, start: int | None = None) -> Tensor:
    """Token ids (B, T) in 3..vocab-1 with right padding (id 0): row i has T - 2i real tokens;
    with ``start``, every row begins with it (SOS)."""
    ids = torch.randint(3, vocab, (B, T), generator=_generator())
    if start is not None:
        ids[:, 0] = start
    for i in range(B):
        ids[i, T - 2 * i:] = 0
    return ids.to(device)


def _cross_entropy(model: nn.Module, batch: tuple) -> Tensor:
    *inputs, targets = batch
    logits = model(*inputs)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


# ---- the language model: every positional kind ----------------------------------------------
def _lm(positional: str) -> Case:
    from attnlab.tasks.lm.runtime import build_model

    def batch(device):
        window = torch.randint(0, 40, (B, T + 1), generator=_generator()).to(device)
        return window[:, :-1], window[:, 1:]

    return Case(f"lm-{positional}",
                lambda: build_model(_cfg("lm", vocab_size=40, block_size=16,
                                         positional=positional, attention_dropout=0.1)),
                batch, lambda model, b: lm_loss(model, *b))


# ---- translation: the Transformer and the recurrent models -------------------------------------
def _translate(arch: str) -> Case:
    from attnlab.tasks.translate.runtime import build_model

    def batch(device):
        return _padded_ids(30, device), _padded_ids(40, device, start=1)

    def loss(model, b):
        return seq2seq_loss(model, *b, label_smoothing=0.1, pad_id=model.pad_id)[0]

    name = "translate" if arch == "transformer" else f"translate-{arch}"
    return Case(name, lambda: build_model(_cfg("translate", arch=arch, src_vocab_size=30,
                                               tgt_vocab_size=40, max_len=16)), batch, loss)


# ---- classification: text tokens, feature sets with a mask, digit sets --------------------------
def _classify_tokens() -> Case:
    from attnlab.tasks.classify.runtime import build_model

    def batch(device):
        return _padded_ids(50, device), torch.tensor([0, 2, 1], device=device)

    return Case("classify-tokens",
                lambda: build_model(_cfg("classify", labels=["a", "b", "c"], model_vocab_size=50,
                                         max_len=16)),
                batch, _cross_entropy)


def _classify_sets() -> Case:
    from attnlab.tasks.classify.runtime import build_model

    def batch(device):
        x = torch.randn(B, T, 5, generator=_generator())
        mask = torch.arange(T)[None, :] < torch.tensor([[T], [T - 3], [1]])  # (B, T)
        return x.to(device), mask.to(device), torch.tensor([1, 0, 1], device=device)

    return Case("classify-sets",
                lambda: build_model(_cfg("classify", labels=["a", "b"], set_column="set",
                                         feature_names=list("vwxyz"), max_len=16)),
                batch, _cross_entropy)


def _anomaly() -> Case:
    from attnlab.tasks.anomaly.runtime import build_model

    def batch(device):
        x = torch.rand(B, T, 64, generator=_generator())
        return x.to(device), torch.tensor([3, 0, 9], device=device)

    return Case("anomaly", lambda: build_model(_cfg("anomaly")), batch, _cross_entropy)


# ---- per-element prediction (reverse / copy / sort) ---------------------------------------------
def _sequence() -> Case:
    from attnlab.tasks.sequence.runtime import build_model

    def batch(device):
        x = torch.randint(0, 10, (B, T), generator=_generator())
        return x.to(device), x.flip(-1).to(device)

    return Case("reverse", lambda: build_model(_cfg("reverse", input_dropout=0.1)), batch,
                _cross_entropy)


# ---- jets ----------------------------------------------------------------------------------
def _jets(**options: Any) -> Case:
    from attnlab.tasks.jets.runtime import build_model

    def batch(device):
        g = _generator()
        p3 = torch.randn(B, T, 3, generator=g) * 20
        e = p3.norm(dim=-1, keepdim=True) + torch.rand(B, T, 1, generator=g)  # massive, E > |p|
        p4 = torch.cat([e, p3], -1)
        p4[1, 6:] = 0  # zero rows: padding
        p4[2, 2:] = 0
        return p4.to(device), torch.tensor([1, 0, 1], device=device)

    name = "jets" + "".join(f"-{k.replace('_', '-')}" for k in options)
    return Case(name, lambda: build_model(_cfg("jets", **options)), batch, _cross_entropy)


# ---- graph ---------------------------------------------------------------------------------
def _graph(kind: str) -> Case:
    from attnlab.tasks.graph.runtime import build_model

    N, F_in, C = 12, 6, 3

    def batch(device):
        g = _generator()
        x = torch.randn(N, F_in, generator=g)
        a = torch.rand(N, N, generator=g) < 0.3
        adjacency = (a | a.T) & ~torch.eye(N, dtype=torch.bool)  # symmetric, no self-loops
        targets = torch.randint(0, C, (N,), generator=g)
        targets[::2] = -100  # the nodes outside the split
        return x.to(device), adjacency.to(device), targets.to(device)

    def loss(model, b):
        return graph_step(model, b)[0]  # the accuracy is in the graph too

    return Case(f"graph-{kind}",
                lambda: build_model(_cfg("graph", kind=kind, model_dim=4, num_heads=2,
                                         dropout=0.6, in_dim=F_in, num_classes=C)),
                batch, loss)


TRANSFORMER_CASES = [
    *(_lm(kind) for kind in ("learned", "sinusoidal", "rope", "alibi", "none")),
    _translate("transformer"),
    _classify_tokens(), _classify_sets(), _anomaly(), _sequence(),
    _jets(), _jets(class_token=True),
    *(_graph(kind) for kind in ("gat", "mean", "mlp")),
]
# The recurrent translation models: torch.compile does not trace nn.GRU (TorchDynamo
# leaves RNN modules to eager, ``torch._dynamo.config.allow_rnn``) and packing the padded
# source needs its lengths on the host (``pack_padded_sequence``).
RNN_CASES = [_translate(arch) for arch in ("rnn", "rnn-additive", "rnn-bilinear")]
CASES = TRANSFORMER_CASES + RNN_CASES
