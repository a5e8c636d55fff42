"""Key/value cache for incremental decoding.

Shapes: B batch, H heads, t new steps, T cached steps, hd head width, W window.

During generation each new token needs the keys and values of every earlier token. Recomputing
them costs O(T) projections per step; keeping them costs memory only. A cache is filled in place
in a buffer that grows by doubling, so a step copies only its own keys and values.

A layer with a sliding window (Mistral's: query i sees keys i − W + 1..i) never reads a key more
than W − 1 steps old, so its cache keeps at most the last W − 1 of them beside the new ones: in
a buffer of 2·W steps, whose oldest keys are dropped, and the W − 1 kept moved to its front,
when it is full (one copy of W − 1 steps every W or so steps). Its memory is then bounded by the
window, not the length generated (Jiang et al., 2023, "Mistral 7B", §2: a rolling buffer; this
is the trimmed form of it, whose keys stay in order, so the attention's masks need no change).
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
        window: the layer's sliding window W, or None: keep every step. With a window, only
            the last W − 1 earlier steps are kept (all a new query may see), in at most
            max(2·W, W − 1 + t) steps of memory for t new ones.

    Attributes:
        length: steps appended so far (the next step's position).
        start: steps dropped from the front (a windowed cache's oldest); ``k`` and ``v`` hold
            steps start..length − 1.

    Examples:
        >>> cache = KVCache()
        >>> k, v = cache.update(torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4)); cache.length
        3
    """

    def __init__(self, capacity: int = 64, *, window: int | None = None) -> None:
        self.capacity, self.window = capacity, window
        self._k: Tensor | None = None
        self._v: Tensor | None = None
        self.length = 0
        self.start = 0
        self.static = False

    @property
    def stored(self) -> int:
        """How many steps the buffer holds (``length`` less those dropped)."""
        return self.length - self.start

    @property
    def k(self) -> Tensor | None:
        return None if self._k is None else self._k[:, :, : self.stored]

    @property
    def v(self) -> Tensor | None:
        return None if self._v is None else self._v[:, :, : self.stored]

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Append k, v of shape (B, H, t, hd); return the keys and values the new queries may
        read, (B, H, T + t, hd): every earlier step, or a windowed cache's last ones."""
        t = k.shape[2]
        if self.window is not None:
            self._trim(t)
        start = self.stored
        need = start + t
        if self._k is None or need > self._k.shape[2]:
            self._grow(k, v, need)
        kb, vb = self._k, self._v  # (B, H, capacity, hd)
        kb[:, :, start:need] = k
        vb[:, :, start:need] = v
        self.length += t
        return kb[:, :, :need], vb[:, :, :need]

    def kept(self, mask: Tensor | None) -> Tensor | None:
        """A key mask over every step so far (..., length) cut to the steps still stored
        (..., length − start); any other mask as it is (the attention checks its shape)."""
        if mask is None or not self.start or mask.shape[-1] != self.length:
            return mask
        return mask[..., self.start:]

    def _trim(self, t: int) -> None:
        """Before t new steps that would not fit: drop all but the last W − 1 stored steps,
        moved to the front of a fresh buffer of max(2·W, W − 1 + t) steps."""
        W, stored = self.window, self.stored
        keep = min(stored, W - 1)
        if self._k is None or stored + t <= self._k.shape[2] or keep == stored:
            return  # room enough, or nothing to drop (then it grows as any cache)
        B, H, _, hd = self._k.shape
        cap = max(2 * W, keep + t)
        new_k, new_v = self._k.new_empty(B, H, cap, hd), self._v.new_empty(B, H, cap, hd)
        new_k[:, :, :keep] = self._k[:, :, stored - keep : stored]
        new_v[:, :, :keep] = self._v[:, :, stored - keep : stored]
        self._k, self._v, self.start = new_k, new_v, self.start + stored - keep

    def _bound(self, cap: int, need: int) -> int:
        """A windowed cache grows to 2·W steps at most (or what one update needs)."""
        return cap if self.window is None else min(cap, max(2 * self.window, need))

    def _grow(self, k: Tensor, v: Tensor, need: int) -> None:
        cap = max(self.capacity, need)
        while cap < need:
            cap *= 2
        if self._k is not None:
            cap = max(cap, 2 * self._k.shape[2])
        cap = self._bound(cap, need)
        new_k = k.new_empty(k.shape[0], k.shape[1], cap, k.shape[3])  # (B, H, cap, hd)
        new_v = v.new_empty(v.shape[0], v.shape[1], cap, v.shape[3])
        stored = self.stored
        if self._k is not None and stored:
            new_k[:, :, :stored] = self._k[:, :, :stored]
            new_v[:, :, :stored] = self._v[:, :, :stored]
        self._k, self._v = new_k, new_v

    def reserve(self, total: int) -> None:
        """Pre-allocate room for ``total`` steps (a windowed cache: for 2·W at most), so later
        ``update`` calls only copy their own keys and values (generation knows its length up
        front)."""
        total = self._bound(total, 0)
        if self._k is None or self.static or total <= self._k.shape[2]:
            return
        B, H, _, hd = self._k.shape
        stored = self.stored
        new_k, new_v = self._k.new_empty(B, H, total, hd), self._v.new_empty(B, H, total, hd)
        new_k[:, :, :stored] = self._k[:, :, :stored]
        new_v[:, :, :stored] = self._v[:, :, :stored]
        self._k, self._v = new_k, new_v

    def nbytes(self) -> int:
        """Bytes the buffers hold (allocated, not only filled): what the cache costs."""
        return sum(b.numel() * b.element_size() for b in (self._k, self._v) if b is not None)

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
