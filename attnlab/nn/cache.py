"""Key/value cache for incremental decoding.

Shapes: B batch, H heads, t new steps, T cached steps, hd head width.

During generation each new token needs the keys and values of every earlier token. Recomputing
them costs O(T) projections per step; keeping them costs memory only. A cache is filled in place
in a buffer that grows by doubling, so a step copies only its own keys and values.
"""
from __future__ import annotations

from torch import Tensor

__all__ = ["KVCache"]


class KVCache:
    """Keys and values of one attention layer across decoding steps.

    Self-attention appends each step's keys and values (``update``); cross-attention computes
    them once from the encoder memory and reuses them (``set_static`` then ``k``/``v``).

    Args:
        capacity: initial number of steps to allocate for (grows by doubling when exceeded).

    Examples:
        >>> cache = KVCache()
        >>> k, v = cache.update(torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4)); cache.length
        3
    """

    def __init__(self, capacity: int = 64) -> None:
        self.capacity = capacity
        self._k: Tensor | None = None
        self._v: Tensor | None = None
        self.length = 0
        self.static = False

    @property
    def k(self) -> Tensor | None:
        return None if self._k is None else self._k[:, :, : self.length]

    @property
    def v(self) -> Tensor | None:
        return None if self._v is None else self._v[:, :, : self.length]

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Append k, v of shape (B, H, t, hd); return all keys and values (B, H, T + t, hd)."""
        start = self.length
        need = start + k.shape[2]
        if self._k is None or need > self._k.shape[2]:
            self._grow(k, v, need)
        kb, vb = self._k, self._v  # (B, H, capacity, hd)
        kb[:, :, start:need] = k
        vb[:, :, start:need] = v
        self.length = need
        return kb[:, :, :need], vb[:, :, :need]

    def _grow(self, k: Tensor, v: Tensor, need: int) -> None:
        cap = max(self.capacity, need)
        while cap < need:
            cap *= 2
        if self._k is not None:
            cap = max(cap, 2 * self._k.shape[2])
        new_k = k.new_empty(k.shape[0], k.shape[1], cap, k.shape[3])  # (B, H, cap, hd)
        new_v = v.new_empty(v.shape[0], v.shape[1], cap, v.shape[3])
        if self._k is not None and self.length:
            new_k[:, :, : self.length] = self._k[:, :, : self.length]
            new_v[:, :, : self.length] = self._v[:, :, : self.length]
        self._k, self._v = new_k, new_v

    def reserve(self, total: int) -> None:
        """Pre-allocate room for ``total`` steps, so later ``update`` calls only copy their own
        keys and values (generation knows its length up front)."""
        if self._k is None or self.static or total <= self._k.shape[2]:
            return
        B, H, _, hd = self._k.shape
        new_k, new_v = self._k.new_empty(B, H, total, hd), self._v.new_empty(B, H, total, hd)
        new_k[:, :, : self.length] = self._k[:, :, : self.length]
        new_v[:, :, : self.length] = self._v[:, :, : self.length]
        self._k, self._v = new_k, new_v

    def set_static(self, k: Tensor, v: Tensor) -> None:
        """Store keys and values computed once (cross-attention memory)."""
        self._k, self._v, self.length, self.static = k, v, k.shape[2], True

    def reorder(self, index: Tensor) -> None:
        """Select batch rows (beam search): row i becomes old row ``index[i]``."""
        if self._k is not None:
            self._k = self._k.index_select(0, index)
            self._v = self._v.index_select(0, index)

    def __len__(self) -> int:
        return self.length
