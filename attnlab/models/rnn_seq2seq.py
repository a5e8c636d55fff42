"""The recurrent encoder–decoder that attention was invented for (Cho et al., 2014; Bahdanau,
Cho & Bengio, 2015; Luong, Pham & Manning, 2015).

Shapes: B batch, S source length, T target length, E embedding width, D hidden width,
V_s / V_t vocabularies.

The encoder is a GRU (bidirectional by default) over the source embeddings; its states, brought
to width D, are the memory (B, S, D), and its final states (both directions) give the decoder's
initial state:

    s_0 = tanh(W_init [h_S→ ; h_1←])

Each decoder step reads the previous target token and the previous context (input feeding),
updates its GRU state s_t, and with attention looks back at the memory with s_t as the query:

    c_t = Σ_j α_tj m_j,   α_t = softmax_j(score(s_t, m_j))   over the real source positions
    logits_t = W_out tanh(W_c [s_t ; c_t])

``attention="additive"`` scores with ``attnlab.nn.AdditiveAttention`` (Bahdanau: vᵀ tanh(W_q s +
W_k m)), ``"bilinear"`` with ``BilinearAttention`` (Luong's "general": sᵀ W m), and ``"none"``
has no attention: c_t = 0, so everything the decoder knows of the source is s_0 — the single
context vector whose limits on long sentences motivated attention.

``generate`` is the same contract as ``Seq2SeqTransformer.generate`` and runs through the same
``attnlab.generation`` loops (greedy) and ``attnlab.beam`` (beam search); the step function keeps
the decoder's state, so each new token costs one GRU step.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ..generation import translate_from_start
from ..nn import AdditiveAttention, BilinearAttention
from ..step_protocol import check_token_ids

__all__ = ["RNNSeq2Seq", "ATTENTIONS"]

ATTENTIONS = ("none", "additive", "bilinear")


class RNNSeq2Seq(nn.Module):
    """A GRU encoder–decoder, with additive, bilinear or no attention.

    Args:
        src_vocab_size, tgt_vocab_size: vocabularies V_s and V_t.
        model_dim: the hidden width D (encoder per direction, decoder, memory).
        embed_dim: embedding width E (default: D).
        num_layers: GRU layers of the encoder and of the decoder.
        attention: "additive", "bilinear" or "none".
        bidirectional: a bidirectional encoder.
        dropout: on the embeddings and between GRU layers.
        pad_id, sos_id, eos_id: special target (and source padding) ids.

    Shape:
        forward: src (B, S), tgt (B, T) -> logits (B, T, V_t) (teacher forcing: tgt starts
        with SOS and position t predicts token t + 1).

    Examples:
        >>> model = RNNSeq2Seq(20, 30, model_dim=16, attention="additive")
        >>> model(torch.tensor([[5, 6, 2]]), torch.tensor([[1, 7, 8]])).shape
        torch.Size([1, 3, 30])
        >>> model.generate(torch.tensor([[5, 6, 2]]), 5, num_beams=2).shape[0]
        1
    """

    def __init__(self, src_vocab_size: int, tgt_vocab_size: int, *, model_dim: int = 64,
                 embed_dim: int | None = None, num_layers: int = 1, attention: str = "additive",
                 bidirectional: bool = True, dropout: float = 0.0, pad_id: int = 0,
                 sos_id: int = 1, eos_id: int = 2) -> None:
        super().__init__()
        if attention not in ATTENTIONS:
            raise ValueError(f"attention must be one of {ATTENTIONS}, got {attention!r}")
        D, E = model_dim, embed_dim or model_dim
        directions = 2 if bidirectional else 1
        self.attention_kind, self.pad_id, self.sos_id, self.eos_id = attention, pad_id, sos_id, eos_id
        self.num_layers, self.model_dim = num_layers, D
        self.src_embedding = nn.Embedding(src_vocab_size, E, padding_idx=pad_id)
        self.tgt_embedding = nn.Embedding(tgt_vocab_size, E, padding_idx=pad_id)
        self.dropout = nn.Dropout(dropout)
        between = dropout if num_layers > 1 else 0.0
        self.encoder = nn.GRU(E, D, num_layers, batch_first=True, bidirectional=bidirectional,
                              dropout=between)
        self.memory_proj = nn.Linear(directions * D, D)  # encoder states -> memory (B, S, D)
        self.init_proj = nn.Linear(directions * D, num_layers * D)  # final states -> s_0
        self.decoder = nn.GRU(E + D, D, num_layers, batch_first=True, dropout=between)
        self.attention = {"additive": lambda: AdditiveAttention(D, D, D),
                          "bilinear": lambda: BilinearAttention(D, D),
                          "none": lambda: None}[attention]()
        self.combine = nn.Linear(2 * D, D)
        self.output = nn.Linear(D, tgt_vocab_size)

    # ---- encoder ------------------------------------------------------------------------
    def encode(self, src: Tensor, src_mask: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """(memory (B, S, D), src_mask (B, S) True = real, s_0 (layers, B, D)). Padding is
        packed away, so a padded batch encodes each sequence as it would alone."""
        mask = src != self.pad_id if src_mask is None else src_mask.bool()
        lengths = mask.sum(1).clamp(min=1).cpu()
        packed = pack_padded_sequence(self.dropout(self.src_embedding(src)), lengths,
                                      batch_first=True, enforce_sorted=False)
        states, final = self.encoder(packed)
        states, _ = pad_packed_sequence(states, batch_first=True, total_length=src.shape[1])
        memory = self.memory_proj(states)  # (B, S, D)
        directions = 2 if self.encoder.bidirectional else 1
        last = final.view(self.num_layers, directions, src.shape[0], -1)[-1]  # (dirs, B, D)
        init = torch.tanh(self.init_proj(torch.cat(list(last), dim=-1)))  # (B, layers·D)
        return memory, mask, init.view(src.shape[0], self.num_layers, -1).transpose(0, 1).contiguous()

    # ---- decoder ------------------------------------------------------------------------
    def decode_steps(self, tgt: Tensor, memory: Tensor, mask: Tensor, state: Tensor,
                     context: Tensor | None = None, alignments: list | None = None
                     ) -> tuple[Tensor, Tensor, Tensor]:
        """Run the decoder over ``tgt`` (B, T) from ``state`` (layers, B, D) and the previous
        ``context`` (B, D; zeros at the start). Returns (logits (B, T, V_t), state, context);
        appends each step's attention weights (B, S) to ``alignments`` if given."""
        B = tgt.shape[0]
        if context is None:
            context = memory.new_zeros(B, self.model_dim)
        embedded = self.dropout(self.tgt_embedding(tgt))  # (B, T, E)
        outputs = []
        for t in range(tgt.shape[1]):
            step_in = torch.cat([embedded[:, t], context], dim=-1)[:, None]  # (B, 1, E + D)
            top, state = self.decoder(step_in, state)  # top (B, 1, D)
            if self.attention is None:
                context = torch.zeros_like(context)
                weights = None
            else:
                values, weights = self.attention(top, memory, memory, mask[:, None, :])
                context = values[:, 0]  # (B, D)
            if alignments is not None and weights is not None:
                alignments.append(weights[:, 0])
            outputs.append(torch.tanh(self.combine(torch.cat([top[:, 0], context], dim=-1))))
        return self.output(torch.stack(outputs, dim=1)), state, context

    def forward(self, src: Tensor, tgt: Tensor, src_mask: Tensor | None = None) -> Tensor:
        """Teacher forcing: logits (B, T, V_t) for every target position."""
        memory, mask, state = self.encode(src, src_mask)
        return self.decode_steps(tgt, memory, mask, state)[0]

    @torch.no_grad()
    def cross_attention(self, src: Tensor, tgt: Tensor,
                        src_mask: Tensor | None = None) -> list[Tensor]:
        """The decoder's alignment to the source while it reads ``tgt``: one "layer" of one
        head, [(B, 1, T, S)], the same layout as ``Seq2SeqTransformer.cross_attention``
        (weights sum to 1 over the real source positions, 0 on padding). Raises ValueError
        when the model has no attention."""
        if self.attention is None:
            raise ValueError("an RNN encoder-decoder without attention has no alignment")
        memory, mask, state = self.encode(src, src_mask)
        alignments: list[Tensor] = []
        self.decode_steps(tgt, memory, mask, state, alignments=alignments)
        return [torch.stack(alignments, dim=1)[:, None]]

    # ---- generation ---------------------------------------------------------------------
    @torch.no_grad()
    def generate(self, src: Tensor, max_new_tokens: int, *, num_beams: int = 1,
                 length_penalty: float = 1.0, src_mask: Tensor | None = None,
                 eos_token_id: int | None = None, use_cache: bool = True,
                 finite: list[bool] | None = None) -> Tensor:
        """Translate: start from SOS and append tokens until EOS (greedy or beam search), as
        ``Seq2SeqTransformer.generate``. Returns (B, 1 + N) ids: SOS, the tokens (EOS
        included), then padding. ``use_cache=False`` re-runs the decoder over the whole prefix
        at every step (slower; the same tokens); ``finite``, when given, gets per row whether
        every step's logits were finite. ValueError for a source id outside the vocabulary."""
        # checked once, here: the forward passes read no values
        check_token_ids(src, self.src_embedding.num_embeddings, "src")

        def encoded():  # the step function over the encoded source, made in eval mode
            return _RNNStep(self, *self.encode(src, src_mask), use_cache)

        return translate_from_start(self, encoded, src.shape[0], max_new_tokens,
                                    num_beams=num_beams, length_penalty=length_penalty,
                                    eos_token_id=eos_token_id, device=src.device,
                                    finite=finite)


class _RNNStep:
    """The ``attnlab.generation`` step function of an ``RNNSeq2Seq`` and one source batch: it
    keeps the decoder's state and context after the tokens it has read."""

    def __init__(self, model: RNNSeq2Seq, memory: Tensor, mask: Tensor, state: Tensor,
                 use_cache: bool) -> None:
        self.model, self.memory, self.mask, self.start = model, memory, mask, state
        self.use_cache = use_cache
        self.state, self.context, self.seen = state, None, 0

    def __call__(self, tokens: Tensor) -> Tensor:  # (B, T) -> (B, V_t)
        if not self.use_cache:
            return self.model.decode_steps(tokens, self.memory, self.mask, self.start)[0][:, -1]
        logits, self.state, self.context = self.model.decode_steps(
            tokens[:, self.seen:], self.memory, self.mask, self.state, self.context)
        self.seen = tokens.shape[1]
        return logits[:, -1]

    def reorder(self, index: Tensor) -> None:
        self.memory, self.mask = self.memory.index_select(0, index), self.mask.index_select(0, index)
        self.start, self.state = self.start.index_select(1, index), self.state.index_select(1, index)
        if self.context is not None:
            self.context = self.context.index_select(0, index)
