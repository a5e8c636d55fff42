"""Draw docs/images/llama_block.png: GPT-2's block and a Llama block side by side.

    python docs/figures/llama_block.py [OUT.png]

The boxes are labelled from the models attnlab builds, not typed by hand: each column is a
``CausalLM`` made from a ``CausalLMConfig`` (the flags of ``attnlab train lm --arch gpt2`` and
``--arch llama --num-kv-heads 2``), and ``block_labels`` reads the class of its norms and
feed-forward network, its query and key/value heads and where its positions enter. A change
to the parts that the page's figure would no longer show changes the figure (and
``tests/test_docs_figures.py`` fails until it is redrawn and committed).
"""
from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE.parent / "images" / "llama_block.png"

# The two columns: the flags' settings (docs/language_model.md), 8 heads so that the sharing of
# grouped-query attention shows. The width only sets the labels' D -> F.
WIDTH, HEADS, KV_HEADS = 96, 8, 2
COLUMNS = {
    "GPT-2 block (attnlab train lm --arch gpt2)":
        dict(positional="learned", norm="layer", ff="mlp", bias=True),
    "Llama block (--arch llama --num-kv-heads 2)":
        dict(positional="rope", norm="rms", ff="swiglu", bias=False, num_kv_heads=KV_HEADS),
}
NEW = "#f4a259"      # a part GPT-2's block does not have
SAME = "#dfe7f2"     # a part both blocks share
INK = "#1d2733"


def build(settings: dict):
    """The one-layer ``CausalLM`` of a column's settings."""
    from attnlab.models import CausalLM
    from attnlab.models.configs import CausalLMConfig

    config = CausalLMConfig(vocab_size=64, model_dim=WIDTH, num_heads=HEADS, num_layers=1,
                            dim_feedforward=4 * WIDTH if settings["ff"] == "mlp" else 256,
                            **settings)
    return CausalLM(config)


def block_labels(model) -> dict:
    """What the figure says of ``model``'s block, read from the modules it is made of."""
    from attnlab.nn import GatedFeedForward, RotaryEmbedding

    block = model.decoder.layers[0]
    attn, ff = block.self_attn, block.linear_net
    gated = isinstance(ff, GatedFeedForward)
    hidden = ff.up_proj.out_features if gated else ff[0].out_features
    act = type(ff.act if gated else ff[2]).__name__
    return {
        "norm": type(block.norm1).__name__,
        "final_norm": type(model.decoder.norm).__name__,
        "pre_norm": block.norm_first,
        "heads": attn.num_heads,
        "kv_heads": attn.num_kv_heads,
        "rope": isinstance(attn.pos_embeddings, RotaryEmbedding),
        "added_positions": type(getattr(model, "positional_encoding", None)).__name__,
        "gated": gated,
        "activation": act,
        "ff_shape": f"{ff.down_proj.out_features if gated else ff[3].out_features} → {hidden}",
        "bias": attn.o_proj.bias is not None,
        "tied": model.lm_head.weight is model.token_embedding.weight,
    }


# ---- drawing ------------------------------------------------------------------------------
def _box(ax, x, y, w, h, text, colour, size=10.5, weight="normal"):
    from matplotlib.patches import FancyBboxPatch

    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.18",
                                facecolor=colour, edgecolor=INK, lw=1.1))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=size, color=INK,
            weight=weight, linespacing=1.25)


def _arrow(ax, start, end, **kw):
    ax.annotate("", xy=end, xytext=start,
                arrowprops=dict(arrowstyle="-|>", color=INK, lw=1.1, shrinkA=0, shrinkB=0,
                                mutation_scale=11, **kw))


def _add(ax, x, y):
    """The residual addition ⊕ on the stream."""
    from matplotlib.patches import Circle

    ax.add_patch(Circle((x, y), 0.28, facecolor="white", edgecolor=INK, lw=1.1, zorder=3))
    ax.text(x, y - 0.02, "+", ha="center", va="center", fontsize=12, color=INK, zorder=4)


def _heads(ax, x0, x1, y, n_q, n_kv, colour):
    """Query heads (top row) and the key/value heads they read (bottom row), with lines."""
    from matplotlib.patches import Rectangle

    def centres(n):
        step = (x1 - x0) / n
        return [x0 + step * (i + 0.5) for i in range(n)]

    q, kv = centres(n_q), centres(n_kv)
    s = min(0.34, (x1 - x0) / n_q * 0.7)
    for i, cx in enumerate(q):
        g = i // (n_q // n_kv)  # the key/value head query head i reads
        ax.plot([cx, kv[g]], [y + 0.62, y + 0.18], color=INK, lw=0.8)
        ax.add_patch(Rectangle((cx - s / 2, y + 0.62), s, s * 0.9, facecolor="white",
                               edgecolor=INK, lw=0.9))
    w = min(0.9, (x1 - x0) / n_kv * 0.55)
    for cx in kv:
        ax.add_patch(Rectangle((cx - w / 2, y - 0.16), w, 0.34, facecolor=colour,
                               edgecolor=INK, lw=0.9))
    ax.text(x0 - 0.12, y + 0.77, "q", ha="right", va="center", fontsize=9.5, color=INK)
    ax.text(x0 - 0.12, y + 0.01, "k, v", ha="right", va="center", fontsize=9.5, color=INK)


def _column(ax, x, title, labels):
    """One block, bottom (token ids) to top (logits), the residual stream on the left."""
    stream, left, width = x + 1.3, x + 2.6, 6.9
    mid = left + width / 2
    gpt = not labels["rope"]
    ax.text(x + 5, 21.15, title, ha="center", va="center", fontsize=12, weight="bold",
            color=INK)
    pre = "pre-norm: x + sublayer(norm(x))" if labels["pre_norm"] else "post-norm"
    ax.text(x + 5, 20.4, pre, ha="center", va="center", fontsize=10.5, color=INK)
    ax.text(stream, 0.2, "token ids", ha="center", va="center", fontsize=10, color=INK)
    _arrow(ax, (stream, 0.45), (stream, 0.9))
    _box(ax, stream - 1.0, 0.9, 2.0, 0.8, "embedding", SAME, size=10)
    if labels["added_positions"] != "NoneType":
        _box(ax, left + 1.6, 0.9, 4.6, 0.8, "+ learned position table", SAME, size=10)
        _arrow(ax, (left + 1.6, 1.3), (stream + 1.0, 1.3))
    else:
        ax.text(left + 1.6, 1.3, "no positions added here", ha="left", va="center",
                fontsize=10, color=INK, style="italic")
    norm = labels["norm"]
    norm_colour = SAME if norm == "LayerNorm" else NEW
    top = 15.4  # the second residual addition

    # attention sub-layer: branch at 2.4, norm, attention, back into the addition at 8.9
    ax.plot([stream, stream], [1.7, top + 0.6], color=INK, lw=1.6, zorder=1)
    ax.plot([stream, mid], [2.4, 2.4], color=INK, lw=1.1)
    _arrow(ax, (mid, 2.4), (mid, 2.8))
    _box(ax, left + 1.2, 2.8, width - 2.4, 0.75, norm, norm_colour, weight="bold")
    _arrow(ax, (mid, 3.55), (mid, 3.95))
    _box(ax, left, 3.95, width, 4.25, "", SAME if gpt else NEW)
    if labels["kv_heads"] == labels["heads"]:
        head_text = f"multi-head attention:\n{labels['heads']} heads, each with its own k, v"
    else:
        head_text = (f"grouped-query attention: {labels['heads']} query\n"
                     f"heads share {labels['kv_heads']} key/value heads")
    ax.text(mid, 7.55, head_text, ha="center", va="center", fontsize=10.5, color=INK,
            weight="bold", linespacing=1.25)
    _heads(ax, left + 1.2, left + width - 0.4, 5.75, labels["heads"], labels["kv_heads"],
           "white" if gpt else "#fbd3a8")
    if labels["rope"]:
        ax.text(mid, 4.95, "RoPE rotates q and k by position", ha="center", va="center",
                fontsize=10, color=INK, weight="bold")
    ax.text(mid, 4.45, "causal softmax(q kᵀ/√d) v", ha="center", va="center", fontsize=10,
            color=INK)
    ax.plot([mid, mid], [8.2, 8.9], color=INK, lw=1.1)
    _arrow(ax, (mid, 8.9), (stream + 0.28, 8.9))
    _add(ax, stream, 8.9)

    # feed-forward sub-layer: branch at 9.5, norm, FFN, back into the addition at ``top``
    ax.plot([stream, mid], [9.5, 9.5], color=INK, lw=1.1)
    _arrow(ax, (mid, 9.5), (mid, 9.9))
    _box(ax, left + 1.2, 9.9, width - 2.4, 0.75, norm, norm_colour, weight="bold")
    _arrow(ax, (mid, 10.65), (mid, 11.05))
    _box(ax, left, 11.05, width, 3.65, "", NEW if labels["gated"] else SAME)
    if labels["gated"]:
        ax.text(mid, 14.3, f"SwiGLU ({labels['ff_shape']} → {WIDTH}, no biases)",
                ha="center", va="center", fontsize=10.5, weight="bold", color=INK)
        gx, ux = left + 1.5, left + width - 1.5
        _box(ax, gx - 1.0, 11.3, 2.0, 0.55, "gate", "white", size=9.5)
        _box(ax, ux - 1.0, 11.3, 2.0, 0.55, "up", "white", size=9.5)
        _arrow(ax, (gx, 11.85), (gx, 12.2))
        ax.text(gx, 12.4, labels["activation"], ha="center", va="center", fontsize=9.5,
                color=INK)
        ax.text(mid, 12.85, "⊙", ha="center", va="center", fontsize=15, color=INK)
        ax.plot([gx, mid - 0.3], [12.6, 12.85], color=INK, lw=0.9)
        ax.plot([ux, mid + 0.3], [11.85, 12.85], color=INK, lw=0.9)
        _arrow(ax, (mid, 13.05), (mid, 13.3))
        _box(ax, mid - 0.9, 13.3, 1.8, 0.5, "down", "white", size=9.5)
    else:
        ax.text(mid, 14.3, f"two-layer MLP ({labels['ff_shape']} → {WIDTH})", ha="center",
                va="center", fontsize=10.5, weight="bold", color=INK)
        ax.text(mid, 12.6, f"Linear → {labels['activation']} → Linear\n(with biases)",
                ha="center", va="center", fontsize=10, color=INK, linespacing=1.4)
    ax.plot([mid, mid], [14.7, top], color=INK, lw=1.1)
    _arrow(ax, (mid, top), (stream + 0.28, top))
    _add(ax, stream, top)

    # the stack, the final norm and the output layer
    ax.plot([x + 0.3, x + 0.15, x + 0.15, x + 0.3], [2.2, 2.2, top + 0.35, top + 0.35],
            color=INK, lw=1.1)
    ax.text(x - 0.05, 8.8, "× L", ha="right", va="center", fontsize=11, color=INK)
    _arrow(ax, (stream, top + 0.28), (stream, top + 1.0))
    span = left + width - stream + 1.0
    _box(ax, stream - 1.0, top + 1.0, span, 0.75, f"final {labels['final_norm']}",
         SAME if labels["final_norm"] == "LayerNorm" else NEW, weight="bold")
    _arrow(ax, (stream, top + 1.75), (stream, top + 2.2))
    _box(ax, stream - 1.0, top + 2.2, span, 0.75,
         "output layer (tied to the embedding)" if labels["tied"] else "output layer", SAME)
    _arrow(ax, (stream, top + 2.95), (stream, top + 3.4))
    ax.text(stream + 0.15, top + 3.55, "next-token logits", ha="left", va="center",
            fontsize=10, color=INK)


def draw(path: Path = OUT) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    fig, ax = plt.subplots(figsize=(11, 10.4))
    for i, (title, settings) in enumerate(COLUMNS.items()):
        _column(ax, 0.6 + i * 11.0, title, block_labels(build(settings)))
    ax.legend(handles=[Patch(facecolor=SAME, edgecolor=INK, label="as in GPT-2's block"),
                       Patch(facecolor=NEW, edgecolor=INK, label="the Llama family's part")],
              loc="lower center", bbox_to_anchor=(0.5, -0.01), ncol=2, frameon=False,
              fontsize=10.5)
    ax.set(xlim=(-0.4, 22.0), ylim=(-0.9, 21.6), aspect="equal")
    ax.axis("off")
    fig.tight_layout(pad=0.3)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


if __name__ == "__main__":
    print(draw(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT))
