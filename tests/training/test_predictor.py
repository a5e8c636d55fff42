"""The course's TransformerPredictor (LightningModule) and the pure-torch ElementPredictor."""
import math

import pytest
import torch
import torch.nn.functional as F

from attnlab.models.predictor import ElementPredictor
from attnlab.nn.positional import sinusoidal_table
from attnlab.training.element import element_metrics


def course_forward(model: ElementPredictor, x: torch.Tensor) -> torch.Tensor:
    """The course's forward pass written out with functional ops on the model's weights
    (one post-LN layer, one head): the reference the module must equal."""
    sd = model.state_dict()
    p = "transformer.layers.0."
    h = F.linear(x, sd["input_net.1.weight"], sd["input_net.1.bias"])  # (B, T, D)
    B, T, D = h.shape
    h = h + sinusoidal_table(T, D)
    q, k, v = F.linear(h, sd[p + "self_attn.qkv_proj.weight"], sd[p + "self_attn.qkv_proj.bias"]).chunk(3, -1)
    attention = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(D), dim=-1)  # (B, T, T)
    a = F.linear(attention @ v, sd[p + "self_attn.o_proj.weight"], sd[p + "self_attn.o_proj.bias"])
    h = F.layer_norm(h + a, (D,), sd[p + "norm1.weight"], sd[p + "norm1.bias"])
    f = F.linear(F.relu(F.linear(h, sd[p + "linear_net.0.weight"], sd[p + "linear_net.0.bias"])),
                 sd[p + "linear_net.3.weight"], sd[p + "linear_net.3.bias"])
    h = F.layer_norm(h + f, (D,), sd[p + "norm2.weight"], sd[p + "norm2.bias"])
    o = F.linear(h, sd["output_net.0.weight"], sd["output_net.0.bias"])
    o = F.relu(F.layer_norm(o, (D,), sd["output_net.1.weight"], sd["output_net.1.bias"]))
    return F.linear(o, sd["output_net.4.weight"], sd["output_net.4.bias"])  # (B, T, K)


@pytest.mark.slow
def test_course_usage_forward_maps_and_optimizer():
    from attnlab.training.predictor import TransformerPredictor

    torch.manual_seed(0)
    model = TransformerPredictor(input_dim=10, model_dim=32, num_classes=10, num_heads=1,
                                 num_layers=1, lr=5e-4, warmup=50, max_iters=500)
    x = F.one_hot(torch.randint(10, (3, 16)), 10).float()  # (B, T, C), as the course feeds it
    assert model(x).shape == (3, 16, 10)
    assert model(x, add_positional_encoding=False).shape == (3, 16, 10)
    maps = model.get_attention_maps(x)
    assert len(maps) == 1 and maps[0].shape == (3, 1, 16, 16)
    torch.testing.assert_close(maps[0].sum(-1), torch.ones(3, 1, 16))
    assert model.hparams.lr == 5e-4 and model.hparams.max_iters == 500

    conf = model.configure_optimizers()
    opt, sched = conf["optimizer"], conf["lr_scheduler"]["scheduler"]
    assert conf["lr_scheduler"]["interval"] == "step"  # stepped every iteration, as in the course
    assert opt.param_groups[0]["lr"] == 0.0  # warm-up starts at 0
    for _ in range(50):
        opt.step()
        sched.step()
    expected = 5e-4 * 0.5 * (1 + math.cos(math.pi * 50 / 500))  # end of warm-up
    assert opt.param_groups[0]["lr"] == pytest.approx(expected, rel=1e-9)


@pytest.mark.slow
def test_matches_course_formula_and_state_dict_interchangeable():
    from attnlab.training.predictor import TransformerPredictor

    torch.manual_seed(1)
    module = TransformerPredictor(10, 32, 10, 1, 1, lr=1e-3, warmup=10, max_iters=100).eval()
    plain = ElementPredictor(10, 32, 10, 1, 1).eval()
    plain.load_state_dict(module.state_dict())  # strict: same names, same shapes
    assert set(plain.state_dict()) == set(module.state_dict())
    symbols = torch.randint(10, (4, 16))
    x = F.one_hot(symbols, 10).float()
    with torch.no_grad():
        # integer symbols are one-hot encoded inside: the same function as the course's input
        torch.testing.assert_close(plain(symbols), module(x), rtol=0, atol=0)
        # the fused attention path vs the formula written out: float32 round-off only
        torch.testing.assert_close(plain(x), course_forward(plain, x), rtol=1e-5, atol=1e-5)


def test_symbols_outside_vocabulary_rejected():
    model = ElementPredictor(5, 8, 5, 1, 1)
    with pytest.raises(ValueError, match="0..4"):  # where symbols enter, not forward
        model.predict(torch.tensor([[0, 5]]))


def test_element_metrics_counts_tokens_and_whole_sequences():
    labels = torch.tensor([[0, 1], [1, 1]])
    logits = F.one_hot(torch.tensor([[0, 1], [1, 0]]), 2).float() * 10  # row 2 has one error
    m = element_metrics(logits, labels)
    assert float(m["acc"]) == 0.75 and float(m["seq_acc"]) == 0.5


@pytest.mark.slow
def test_lightning_fit_validate_test_run_the_steps(tmp_path, caplog):
    import logging

    import lightning.pytorch as L

    from attnlab.data import SequenceDataset, batch_loader
    from attnlab.training.predictor import TransformerPredictor

    torch.manual_seed(0)
    train = SequenceDataset("copy", 5, 6, 64, seed=0)
    val = SequenceDataset("copy", 5, 6, 32, seed=0, split="val")
    model = TransformerPredictor(5, 16, 5, 2, 1, lr=1e-3, warmup=2, max_iters=4)
    trainer = L.Trainer(max_steps=4, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False,
                        default_root_dir=tmp_path, num_sanity_val_steps=0)
    before = [p.detach().clone() for p in model.parameters()]
    trainer.fit(model, batch_loader(train, 16, shuffle=True), batch_loader(val, 32, shuffle=False))
    assert trainer.global_step == 4
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert {"train_loss", "val_loss", "val_acc", "val_seq_acc"} <= set(trainer.callback_metrics)
    with caplog.at_level(logging.INFO):
        (result,) = trainer.test(model, batch_loader(val, 32, shuffle=False), verbose=False)
    assert 0.0 <= result["test_acc"] <= 1.0 and "test_seq_acc" in result
    # the course's fit-then-test is quiet: the module's callback is not added twice
    assert "override existing callbacks" not in caplog.text


@pytest.mark.slow  # imports Lightning
def test_a_trainer_that_fit_the_course_module_shows_another_modules_own_error():
    import lightning.pytorch as L

    from attnlab.training.predictor import TransformerPredictor

    class Other(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(6, 1)

        def training_step(self, batch, i):
            return self.lin(batch[0].float()).sum()

        def configure_optimizers(self):
            raise ValueError("the user's own error")

    batches = [(torch.randint(5, (4, 6)), torch.randint(5, (4, 6))) for _ in range(2)]
    loader = torch.utils.data.DataLoader(batches, batch_size=None)
    trainer = L.Trainer(max_steps=2, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(TransformerPredictor(5, 16, 5, 2, 1, lr=1e-3, warmup=1, max_iters=4), loader)
    with pytest.raises(ValueError, match="the user's own error"):
        trainer.fit(Other(), loader)


@pytest.mark.slow  # imports Lightning
def test_its_schedule_is_the_courses_even_with_a_warmup_longer_than_max_iters():
    """make_optimizer once cut such a warm-up to max_iters (and the cosine's length to one
    past it): at step 25 the factor was 0.26, the course's CosineWarmupScheduler's 0.125."""
    from attnlab.schedulers import CosineWarmupScheduler
    from attnlab.training import TransformerPredictor

    model = TransformerPredictor(10, 16, 10, 2, 1, lr=1e-3, warmup=100, max_iters=50)
    ours = model.configure_optimizers()["lr_scheduler"]["scheduler"]
    course = CosineWarmupScheduler(torch.optim.Adam(model.parameters(), lr=1e-3), warmup=100,
                                   max_iters=50)
    assert [ours.get_lr_factor(e) for e in (10, 25, 40, 50)] == \
        [course.get_lr_factor(e) for e in (10, 25, 40, 50)]


@pytest.mark.slow  # imports Lightning
@pytest.mark.parametrize("argument, value, message", [
    ("max_iters", 0, "max_iters must be a positive integer, got 0"),  # trained at lr 0, silently
    ("lr", -1e-3, "lr must be > 0, got -0.001"),
    ("warmup", -5, "warmup must be an integer >= 0, got -5"),
    ("schedule", "cosin", "schedule must be one of cosine, noam, wsd, linear, constant, "
                          "got 'cosin'"),
    ("weight_decay", -0.1, "weight_decay must be >= 0, got -0.1"),
])
def test_training_arguments_refused_when_built_naming_them(argument, value, message):
    """A mistake in the optimiser's arguments is a ValueError naming the argument when the
    model is built, not a traceback from inside ``trainer.fit`` (or, for ``max_iters=0``, a
    fit that trained at a learning rate of 0)."""
    import numpy as np

    from attnlab.training import TransformerPredictor

    arguments = dict(lr=1e-3, warmup=5, max_iters=20, schedule="cosine", weight_decay=0.0)
    with pytest.raises(ValueError) as caught:
        TransformerPredictor(10, 16, 10, 2, 1, **{**arguments, argument: value})
    assert str(caught.value) == message
    # what a notebook computes with NumPy is taken as the number it is
    model = TransformerPredictor(10, 16, 10, 2, 1, lr=np.float32(1e-3), warmup=np.int64(5),
                                 max_iters=np.int64(20))
    assert model.configure_optimizers()["lr_scheduler"]["scheduler"].get_lr_factor(5) > 0
