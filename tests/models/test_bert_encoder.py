"""``BertEncoder`` in training: BERT's dropout (Devlin et al., 2019; Hugging Face's
``BertIntermediate`` and ``BertOutput``), on the embeddings, the attention weights and each
sub-layer's output, and none inside the feed-forward network."""
import torch

from attnlab.models.bert import BertEncoder


def test_the_feed_forward_drops_nothing_inside_while_the_encoder_drops_its_outputs():
    torch.manual_seed(0)
    enc = BertEncoder(50, model_dim=16, num_heads=2, num_layers=2, dim_feedforward=64,
                      dropout=0.5, attention_dropout=0.5).train()
    x = torch.randn(3, 5, 16)
    for block in enc.encoder.layers:
        assert torch.equal(block.linear_net(x), block.linear_net(x))
        assert block.dropout.p == 0.5 and block.self_attn.dropout == 0.5
    ids = torch.randint(0, 50, (3, 5))
    assert not torch.equal(enc(ids), enc(ids))  # still stochastic: the sub-layers' dropout
    enc.eval()
    assert torch.equal(enc(ids), enc(ids))
