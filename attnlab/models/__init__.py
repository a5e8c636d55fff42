"""Task models: input embedding + ``attnlab.nn`` stack + head (torch only)."""
from importlib import import_module

_EXPORTS = {
    "SequenceClassifier": ".classifier",
    "Seq2SeqTransformer": ".seq2seq",
    "RNNSeq2Seq": ".rnn_seq2seq",
    "CausalLM": ".causal_lm",
    "ElementPredictor": ".predictor",
    "BertEncoder": ".bert",
    "BertClassifier": ".bert_classifier",
    "BertTagger": ".bert_tagger",
    "CausalLMConfig": ".configs",
    "SequenceClassifierConfig": ".configs",
    "Seq2SeqConfig": ".configs",
    "ElementPredictorConfig": ".configs",
    "BertEncoderConfig": ".configs",
    "BertClassifierConfig": ".configs",
    "JetTagger": ".jet_tagger",
    "JetTaggerConfig": ".configs",
    "GraphNet": ".graph_net",
    "GraphNetConfig": ".configs",
}

__all__ = list(_EXPORTS)


def __getattr__(name):  # lazy, so each model's module is imported only when used
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name], __name__), name)
    raise AttributeError(f"module 'attnlab.models' has no attribute {name!r}")


def __dir__():  # tab completion finds the lazy names too
    return sorted({*globals(), *_EXPORTS})
