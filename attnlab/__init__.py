"""attnlab — the Transformer built from first principles in PyTorch, and put to real work.

``attnlab.nn`` has the building blocks (torch only); ``attnlab.load(run_dir)`` rebuilds a trained
model from a run directory written by ``attnlab train``.
"""
__version__ = "0.1.0"


def load(run_dir, *, quantize=None):
    """The trained model (and its tokenizer, where it has one) from a run directory.

    Returns the model in eval mode; for tasks with a tokenizer, ``(model, tokenizer)``.
    ``quantize="int8"`` (lm and translate runs): the model's linear layers hold int8 weights,
    for faster generation on the CPU (``attnlab.nn.quantize``).
    """
    from .runs import load as _load  # lazy: keeps `import attnlab` light

    return _load(run_dir, quantize=quantize)


def __getattr__(name):
    # ``attnlab.capture`` is ``attnlab.nn.capture``, imported on first use so that
    # ``import attnlab`` stays light (no torch until a model is touched)
    if name == "capture":
        from .nn.capture import capture

        return capture
    raise AttributeError(f"module 'attnlab' has no attribute {name!r}")
