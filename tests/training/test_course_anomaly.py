"""The course's set anomaly code, with only the import changed: an ``AnomalyPredictor``
subclass of ``TransformerPredictor`` with ``_calculate_loss``, batches ``(sets, indices,
label)`` as the course's ``SetAnomalyDataset`` gives them, a ``pl.Trainer`` with a
``ModelCheckpoint`` on ``val_acc``, ``load_from_checkpoint``, ``trainer.test``. What a learner
checks by hand: the accuracy ``trainer.test`` reports is the one counted from the model's
outputs, and without positional encoding the scores and attention maps permute with the set.
"""
import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

SET_SIZE, FEATURES = 6, 8


def anomaly_predictor():
    from attnlab.training import TransformerPredictor

    class AnomalyPredictor(TransformerPredictor):  # the course's, word for word
        def _calculate_loss(self, batch, mode="train"):
            img_sets, _, labels = batch
            preds = self.forward(img_sets, add_positional_encoding=False)
            preds = preds.squeeze(dim=-1)
            loss = F.cross_entropy(preds, labels)
            acc = (preds.argmax(dim=-1) == labels).float().mean()
            self.log(f"{mode}_loss", loss)
            self.log(f"{mode}_acc", acc, on_epoch=True)
            return loss, acc

        def training_step(self, batch, batch_idx):
            loss, _ = self._calculate_loss(batch, mode="train")
            return loss

        def validation_step(self, batch, batch_idx):
            _ = self._calculate_loss(batch, mode="val")

        def test_step(self, batch, batch_idx):
            _ = self._calculate_loss(batch, mode="test")

    return AnomalyPredictor


def sets(n: int, seed: int) -> TensorDataset:
    """Sets of similar vectors with one shifted far away, at a random position."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, SET_SIZE, FEATURES, generator=g) * 0.3
    label = torch.randint(SET_SIZE, (n,), generator=g)
    x[torch.arange(n), label] += 2.0
    return TensorDataset(x, torch.zeros(n, SET_SIZE, dtype=torch.long), label)


@pytest.mark.slow  # trains with Lightning
def test_course_anomaly_predictor_tests_what_its_outputs_say_and_is_a_set_model(tmp_path):
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import ModelCheckpoint

    torch.manual_seed(0)
    AnomalyPredictor = anomaly_predictor()
    train, val, test = sets(256, 0), sets(64, 1), sets(101, 2)  # 101: an uneven last batch
    trainer = pl.Trainer(default_root_dir=tmp_path, accelerator="cpu", devices=1, max_epochs=2,
                         gradient_clip_val=2, logger=False, enable_progress_bar=False,
                         enable_model_summary=False,
                         callbacks=[ModelCheckpoint(dirpath=tmp_path, save_weights_only=True,
                                                    mode="max", monitor="val_acc")])
    model = AnomalyPredictor(input_dim=FEATURES, model_dim=16, num_heads=2, num_classes=1,
                             num_layers=2, dropout=0.1, input_dropout=0.1, lr=5e-3, warmup=4,
                             max_iters=16)
    trainer.fit(model, DataLoader(train, batch_size=32, shuffle=True), DataLoader(val, 32))
    model = AnomalyPredictor.load_from_checkpoint(trainer.checkpoint_callback.best_model_path)
    assert model.hparams.num_classes == 1 and model.hparams.max_iters == 16

    (reported,) = trainer.test(model, DataLoader(test, batch_size=25), verbose=False)
    model.eval()
    x, _, label = test.tensors
    with torch.no_grad():
        scores = model(x, add_positional_encoding=False).squeeze(-1)  # (N, T)
    by_hand = (scores.argmax(-1) == label).float().mean().item()
    assert reported["test_acc"] == pytest.approx(by_hand, abs=1e-6)  # float32 averaging
    assert by_hand > 0.5  # chance is 1/6: it learned something to count

    # a set has no order: permuting it permutes the scores and both axes of every map
    order = torch.randperm(SET_SIZE)
    with torch.no_grad():
        torch.testing.assert_close(model(x[:, order], add_positional_encoding=False)[..., 0],
                                   scores[:, order], atol=1e-6, rtol=1e-5)
    maps = model.get_attention_maps(x, add_positional_encoding=False)
    permuted = model.get_attention_maps(x[:, order], add_positional_encoding=False)
    assert len(maps) == 2 and maps[0].shape == (101, 2, SET_SIZE, SET_SIZE)
    for layer, moved in zip(maps, permuted):
        torch.testing.assert_close(moved, layer[:, :, order][:, :, :, order], atol=1e-6,
                                   rtol=1e-5)
