"""Every model the tasks train traces to one graph under torch.compile, loss included.

A graph break is where TorchDynamo met something it cannot put in a graph: most often a read
of a tensor's value (``.item()``, ``int(t)``, ``if t.any()``), which on a GPU is also a host
synchronisation. The models take the same path on every device (no ``device.type`` branches),
so this CPU test vouches for the GPU's trace; ``test_cuda_sync.py`` checks a whole training
step on a GPU. Models from ``compile_cases`` (the tasks' own builders), train mode, dropout on.
"""
import pytest
import torch

from .compile_cases import RNN_CASES, TRANSFORMER_CASES


def explain(case):
    torch._dynamo.reset()  # each model traced from scratch
    model, batch = case.model(), case.batch(torch.device("cpu"))
    try:
        return torch._dynamo.explain(lambda *b: case.loss(model, b))(*batch)
    finally:
        torch._dynamo.reset()


def breaks(explanation) -> str:
    return "\n".join(f"- {str(b.reason).splitlines()[0]} at "
                     + ", ".join(f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno}"
                                 for f in b.user_stack[-2:])
                     for b in explanation.break_reasons)


@pytest.mark.slow
@pytest.mark.parametrize("case", TRANSFORMER_CASES, ids=lambda c: c.name)
def test_training_forward_and_loss_are_one_graph(case):
    explanation = explain(case)
    assert (explanation.graph_count, explanation.graph_break_count) == (1, 0), (
        f"{case.name}: {explanation.graph_count} graphs, {explanation.graph_break_count} "
        f"breaks:\n{breaks(explanation)}")


@pytest.mark.slow  # compiling: kept out of the quick suite (`make test-fast`)
@pytest.mark.xfail(strict=True, reason="TorchDynamo leaves nn.GRU to eager (allow_rnn) and "
                   "skips pack_padded_sequence, whose lengths live on the host")
@pytest.mark.parametrize("case", RNN_CASES, ids=lambda c: c.name)
def test_recurrent_models_are_not_one_graph_yet(case):
    assert explain(case).graph_break_count == 0
