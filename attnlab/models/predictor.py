"""A per-element predictor: one class for every position of the input sequence.

Shapes: B batch, T sequence length, C input features (e.g. one-hot symbols), D model width,
K classes, H heads, L layers.

The course's ``TransformerPredictor`` (UvA DL Tutorial 6), as a plain torch module:

    x (B, T, C) → input_net (Dropout → Linear C→D) → + positional encoding
                → TransformerEncoder (L post-LN blocks, feed-forward width 2·D by default)
                → output_net (Linear → LayerNorm → ReLU → Dropout → Linear D→K) → logits (B, T, K)

Its submodules carry the course's names (``input_net``, ``positional_encoding``, ``transformer``,
``output_net``), so its state dict and that of ``attnlab.training.TransformerPredictor`` (the
LightningModule, which extends this class) are the same: a run trained with Lightning loads
here without it.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..nn import PositionalEncoding, TransformerEncoder
from ..settings import heads_divide_width
from .configs import ElementPredictorConfig
from .tensor_inputs import check_tensor

__all__ = ["ElementPredictor", "ElementPredictorConfig"]


def _check_tensor(x) -> None:
    """``TypeError`` for inputs that are not a tensor (a list, a NumPy array)."""
    check_tensor(x, "(B, T) of symbols or (B, T, C) of features")


class ElementPredictor(nn.Module):
    """Transformer encoder that classifies every position of a sequence.

    ``ElementPredictor(config)`` builds the model a ``ElementPredictorConfig`` describes
    (``model.config`` is that object); the keyword form ``ElementPredictor(input_dim, model_dim,
    num_classes, num_heads, num_layers, dropout, input_dropout, **fields)`` builds the config
    once from its arguments (a name that is no field is a ``TypeError``) and then the same
    model.

    Args:
        input_dim: input features C per position (the number of symbols, for one-hot inputs).
        model_dim: model width D.
        num_classes: classes K per position.
        num_heads: attention heads H (model_dim must be divisible by it).
        num_layers: encoder blocks L.
        dropout: dropout in the blocks and the output net.
        input_dropout: dropout on the inputs.
        dim_feedforward: feed-forward width (default 2·model_dim, as in the course).
        norm_first: pre-LN blocks instead of the course's post-LN.
        max_len: longest sequence the positional encoding covers.

    Raises:
        ValueError: if model_dim is not divisible by num_heads, or a size is not positive.

    Shape:
        x: (B, T, C) float features, or (B, T) integer symbols (one-hot encoded to C here);
        mask broadcastable to (B, H, T, T), True = may attend -> logits (B, T, K).

    Examples:
        >>> model = ElementPredictor(10, 32, 10, num_heads=1, num_layers=1)
        >>> model(torch.randint(10, (2, 16))).shape
        torch.Size([2, 16, 10])
    """

    def __init__(self, config: ElementPredictorConfig | int | None = None, /, *args: Any,
                 **fields: Any) -> None:
        super().__init__()
        args = args if config is None else (config, *args)
        config = ElementPredictorConfig.of_arguments("ElementPredictor", args, fields, (
            "input_dim", "model_dim", "num_classes", "num_heads", "num_layers", "dropout",
            "input_dropout"))
        config.require("ElementPredictor", "input_dim", "num_classes")
        if broken := heads_divide_width(config.model_dim, config.num_heads,
                                        names=("model_dim", "num_heads")):
            raise ValueError(broken)  # the encoder's blocks would name their input_dim
        self.config = config
        D = config.model_dim
        self.input_dim, self.num_classes = config.input_dim, config.num_classes
        self.input_net = nn.Sequential(nn.Dropout(config.input_dropout),
                                       nn.Linear(config.input_dim, D))
        self.positional_encoding = PositionalEncoding(d_model=D, max_len=config.max_len)
        self.transformer = TransformerEncoder(
            config.num_layers, input_dim=D, num_heads=config.num_heads,
            dim_feedforward=config.dim_feedforward, dropout=config.dropout,
            norm_first=config.norm_first)
        self.output_net = nn.Sequential(
            nn.Linear(D, D),
            nn.LayerNorm(D),
            nn.ReLU(inplace=True),
            nn.Dropout(config.dropout),
            nn.Linear(D, config.num_classes),
        )

    @classmethod
    def from_config(cls, config: ElementPredictorConfig) -> "ElementPredictor":
        """The model a ``ElementPredictorConfig`` describes (randomly initialised).

        Examples:
            >>> ElementPredictor.from_config(ElementPredictorConfig(input_dim=10, num_classes=10)).config.dim_feedforward
            64
        """
        return cls(config)

    # The one sequence length a trained run learned, and its task (``attnlab.load`` sets both
    # from the run's --seq-len): a reversal sends position i to T-1-i for the T it trained
    # on, so at another length every answer lands in the wrong place without a word. None
    # (a model built in Python, the course's): any length.
    trained_seq_len: int | None = None
    trained_task: str | None = None

    def check_symbols(self, x: Tensor) -> None:
        """Where symbols enter (``predict``, ``get_attention_maps``; the tasks' readers check
        theirs): integer inputs must lie in 0..input_dim-1. Not in ``forward``: reading the
        values is a host synchronisation on a GPU and a graph break under torch.compile;
        there an out-of-range symbol is one_hot's ``RuntimeError`` on the CPU and a device-side
        assert on a GPU.

        Raises:
            TypeError: ``x`` is not a tensor (a list: ``torch.tensor(x)``).
            ValueError: naming the range of the values given and the one expected.
        """
        _check_tensor(x)
        self._check_length(x)
        if x.is_floating_point() or not x.numel():
            return
        low, high = torch.aminmax(x)
        low, high = int(low), int(high)
        if low < 0 or high >= self.input_dim:
            raise ValueError(f"symbols must be in 0..{self.input_dim - 1}, got values "
                             f"{low}..{high}")

    def _check_length(self, x: Tensor) -> None:
        """Refuse a sequence length other than the one a loaded run trained on
        (``trained_seq_len``), naming how to pad a shorter one as ``attnlab predict`` does."""
        T, trained = (x.shape[1] if x.dim() > 1 else None), self.trained_seq_len
        if trained is None or T in (None, trained):
            return
        task = self.trained_task
        if T < trained:
            how = (f"pad a shorter one as attnlab predict does, padded, _ = "
                   f"attnlab.data.pad_to_length({task!r}, tokens, {trained}, "
                   f"{self.input_dim}), and read the first len(tokens) predictions")
        else:
            how = f"a longer one needs a run trained with --seq-len {T} or more"
        raise ValueError(f"x has sequences of {T} symbols; this {task} run was trained on "
                         f"--seq-len {trained} and answers only at that length: {how}")

    def embed(self, x: Tensor, add_positional_encoding: bool = True) -> Tensor:
        """Inputs (B, T) symbols or (B, T, C) features -> (B, T, D) encoder inputs."""
        _check_tensor(x)  # the course's forward: a NumPy array was an AttributeError here
        self._check_length(x)  # the course's model(x) on a loaded run: its shape, no values
        if not x.is_floating_point():
            if x.dim() != 2:  # F.one_hot(x, C) without .float(): one-hot again, (B, T, C, C)
                hint = {3: f"; one-hot features (B, T, input_dim) must be float: "
                           f"F.one_hot(x, {self.input_dim}).float()",
                        1: "; one sequence (T,) is a batch of one: x[None]"}.get(x.dim(), "")
                raise ValueError(f"integer inputs are symbols (B, T), got shape "
                                 f"{tuple(x.shape)}{hint}")
            x = F.one_hot(x.long(), self.input_dim)  # (B, T, C); one_hot takes int64 only
        if x.shape[-1] != self.input_dim:
            raise ValueError(f"inputs have {x.shape[-1]} features, expected input_dim {self.input_dim}")
        # in the weights' dtype: a model trained with --precision 64 or bf16-true (or moved
        # with .to(dtype)) takes the same float32 features and symbols as a float32 one
        x = self.input_net(x.to(self.input_net[-1].weight.dtype))  # (B, T, D)
        if add_positional_encoding:
            x = self.positional_encoding(x)
        return x

    def forward(self, x: Tensor, mask: Tensor | None = None,
                add_positional_encoding: bool = True) -> Tensor:
        x = self.embed(x, add_positional_encoding)
        x = self.transformer(x, mask=mask)  # (B, T, D)
        return self.output_net(x)  # (B, T, K)

    @torch.no_grad()
    def get_attention_maps(self, x: Tensor, mask: Tensor | None = None,
                           add_positional_encoding: bool = True) -> list[Tensor]:
        """Attention weights of every layer: a list of L tensors (B, H, T, T)."""
        self.check_symbols(x)
        x = self.embed(x, add_positional_encoding)
        return self.transformer.get_attention_maps(x, mask=mask)

    @torch.no_grad()
    def predict(self, x: Tensor, *, batch_size: int = 4096,
                finite: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        """Predicted class of every position, (B, T) -> (B, T), in batches, without gradients.

        Args:
            finite: also return (B, T) bools, True where the position's scores are all finite:
                the argmax of a NaN row (a run trained to NaN) is class 0, as sure as any.

        Raises:
            ValueError: for symbols outside 0..input_dim-1 (``check_symbols``).
        """
        self.check_symbols(x)
        was_training = self.training
        self.eval()
        classes, finites = [], []
        try:
            for chunk in x.split(batch_size):
                scores = self(chunk)  # (b, T, K)
                classes.append(scores.argmax(-1))
                finites.append(scores.isfinite().all(-1))
        finally:
            self.train(was_training)
        return (torch.cat(classes), torch.cat(finites)) if finite else torch.cat(classes)
