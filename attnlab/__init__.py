"""attnlab — the Transformer built from first principles in PyTorch, and put to real work.

``attnlab.nn`` has the building blocks (torch only); ``attnlab.load(run_dir)`` rebuilds a trained
model from a run directory written by ``attnlab train``.
"""
__version__ = "0.1.0"


def load(run_dir):
    """The trained model (and its tokenizer, where it has one) from a run directory.

    Returns the model in eval mode; for tasks with a tokenizer, ``(model, tokenizer)``.
    """
    from .runs import load as _load  # lazy: keeps `import attnlab` light

    return _load(run_dir)
