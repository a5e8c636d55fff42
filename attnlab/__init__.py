"""attnlab — the Transformer built from first principles in PyTorch, and put to real work.

``attnlab.nn`` has the building blocks (torch only); ``attnlab.load(run_dir)`` rebuilds a trained
model from a run directory written by ``attnlab train``.
"""
__version__ = "0.1.0"


def load(run_dir, *, quantize=None, checkpoint=None):
    """The trained model (and its tokenizer, where it has one) from a run directory.

    Returns the model in eval mode; for tasks with a tokenizer, ``(model, tokenizer)``.
    ``quantize="int8"`` (lm and translate runs): the model's linear layers hold int8 weights,
    for faster generation on the CPU (``attnlab.nn.quantize``). ``checkpoint="last"``: the
    weights of ``checkpoints/last.ckpt`` (an interrupted run's last saved step) instead of
    ``model.safetensors``.
    """
    from .loading import load as _load  # lazy: keeps `import attnlab` light

    return _load(run_dir, quantize=quantize, checkpoint=checkpoint)


# The public subpackages, imported on first use (``attnlab.nn`` works after ``import attnlab``
# alone), so that ``import attnlab`` stays light: no torch until a model is touched.
_SUBMODULES = ("nn", "models", "schedulers", "generation", "tokenizers", "data", "training",
               "interop", "viz")


def __getattr__(name):
    # ``attnlab.capture`` is ``attnlab.nn.capture``, imported on first use
    if name == "capture":
        from .nn.capture import capture

        return capture
    if name in _SUBMODULES:
        from importlib import import_module

        return import_module(f".{name}", __name__)
    raise AttributeError(f"module 'attnlab' has no attribute {name!r}")


def __dir__():
    """What tab completion offers: the lazily imported names too, not only the loader."""
    return sorted({*globals(), "capture", *_SUBMODULES} - {"_SUBMODULES"})
