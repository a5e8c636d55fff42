"""``check_tensor``, where the models import it from; declared once in
``attnlab.nn.tensor_inputs``, which the masks of ``attnlab.nn`` use too."""
from __future__ import annotations

from ..nn.tensor_inputs import check_tensor

__all__ = ["check_tensor"]
