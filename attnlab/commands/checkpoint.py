"""``--checkpoint last`` of ``predict``, ``translate``, ``generate``, ``evaluate``, ``export``,
``view`` and ``plot attention`` (``attnlab.loading.CHECKPOINT_COMMANDS``): use the
weights of the run's training checkpoint (``checkpoints/last.ckpt``) instead of its final
``model.safetensors`` — the only weights of a run that was interrupted, and the last step
(not the best) of a ``--keep-best`` run. ``attnlab.loading.weights_from`` reads it; the
command prints which step it uses."""
from __future__ import annotations

from ..loading import CHECKPOINT_FLAG, CHECKPOINTS


def add_checkpoint_flag(parser) -> None:
    parser.add_argument(
        CHECKPOINT_FLAG, choices=CHECKPOINTS, metavar="last",
        help="use the weights of DIR/checkpoints/last.ckpt (an interrupted run's last saved "
             "step; the last step of a --keep-best run) instead of DIR/model.safetensors, "
             "saying which step")
