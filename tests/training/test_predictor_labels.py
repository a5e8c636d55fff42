"""``TransformerPredictor`` classifies every position: its labels are (B, T). A learner who
trains it on the course's anomaly sets without the course's subclass (one label per set) got
cross-entropy's "Expected input batch_size (160) to match target batch_size (16)" from deep
inside ``trainer.fit``; now one ValueError says which shape it needs and what to write."""
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from attnlab.training.element import element_metrics


def test_element_metrics_names_labels_of_another_shape():
    with pytest.raises(ValueError, match=r"^labels must be \(B, T\) = \(4, 6\), a class for every "
                                         r"position, got shape \(4, 5\)$"):
        element_metrics(torch.randn(4, 6, 3), torch.zeros(4, 5, dtype=torch.long))


@pytest.mark.slow  # trains with Lightning
def test_a_label_per_set_is_refused_naming_the_course_subclass(tmp_path):
    import lightning.pytorch as pl

    from attnlab.training import TransformerPredictor

    sets, odd_one = torch.rand(32, 10, 8), torch.randint(10, (32,))  # (B, T, F), (B,)
    model = TransformerPredictor(8, 16, 1, 2, 1, lr=1e-3, warmup=2, max_iters=4)
    trainer = pl.Trainer(max_steps=4, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False,
                         default_root_dir=tmp_path)
    with pytest.raises(ValueError, match=r"^labels must be \(B, T\) = \(16, 10\), a class for "
                                         r"every position, got shape \(16,\); a label per "
                                         r"sequence or set .* AnomalyPredictor"):
        trainer.fit(model, DataLoader(TensorDataset(sets, odd_one), batch_size=16))
