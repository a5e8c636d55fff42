"""The course's ``TransformerPredictor(weight_decay=...)`` decays what ``attnlab train
--weight-decay`` decays: the matrices, not the biases and LayerNorms' scales (it gave AdamW
every parameter in one group, so its norms' scales were pulled towards 0 and its biases too);
and a decay whose product with the rate is 1 or more is refused when it is built, as the flag
is, rather than zeroing the matrices in ``trainer.fit``."""
import pytest
import torch


def test_the_course_module_decays_matrices_only():
    from attnlab.training import TransformerPredictor

    torch.manual_seed(0)
    model = TransformerPredictor(10, 16, 10, 2, 1, lr=1e-2, warmup=0, max_iters=20,
                                 schedule="constant", weight_decay=0.1)
    opt = model.configure_optimizers()["optimizer"]
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    for p in model.parameters():  # a zero gradient: AdamW's decoupled decay alone moves them
        p.grad = torch.zeros_like(p)
    opt.step()
    for name, p in model.named_parameters():
        kept = 1.0 if p.ndim < 2 else 1 - 1e-2 * 0.1
        torch.testing.assert_close(p.detach(), before[name] * kept, rtol=0, atol=1e-7,
                                   msg=lambda m: f"{name}: {m}")
    assert any(p.ndim < 2 and "norm" in n for n, p in model.named_parameters())


def test_a_decay_that_would_erase_the_matrices_is_refused_when_built():
    from attnlab.training import TransformerPredictor

    with pytest.raises(ValueError) as caught:
        TransformerPredictor(10, 16, 10, 2, 1, lr=1e-3, warmup=0, max_iters=20,
                             weight_decay=1000.0)
    assert str(caught.value).startswith("weight_decay 1000 with a learning rate of 0.001 "
                                        "(lr): each step would multiply the weight matrices "
                                        "by 1 - rate × decay = 0")
