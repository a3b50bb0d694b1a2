"""pytorch/examples word_language_model (``model.py``'s ``RNNModel``, ``main.py``'s ``train``), on synthetic token
ids: an LSTM language model updated by hand, with no ``torch.optim`` optimizer (``clip_grad_norm_``, then
``p.data.add_(p.grad, alpha=-lr)``), batches time first (``batchify``), the hidden state carried from one batch
to the next and detached (``repackage_hidden``). ``train(model, train_data, step_end)``."""

import torch
import torch.nn as nn
import torch.nn.functional as F

NTOKEN = 2000  # corpus patch: a synthetic vocabulary (Wikitext-2's is 33,278 words)
EMSIZE, NHID, NLAYERS, DROPOUT = 200, 200, 2, 0.2  # main.py's defaults
BATCH, BPTT, LR, CLIP = 20, 35, 20.0, 0.25  # main.py's defaults


class RNNModel(nn.Module):
    """An encoder, a recurrent module and a decoder, as model.py builds them (untied, main.py's default)."""

    def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5):
        super().__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        self.init_weights()
        self.rnn_type, self.nhid, self.nlayers = rnn_type, nhid, nlayers

    def init_weights(self):
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output)
        decoded = decoded.view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        if self.rnn_type == "LSTM":
            return (weight.new_zeros(self.nlayers, bsz, self.nhid), weight.new_zeros(self.nlayers, bsz, self.nhid))
        return weight.new_zeros(self.nlayers, bsz, self.nhid)


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous()


def get_batch(source, i, bptt=BPTT):
    seq_len = min(bptt, len(source) - 1 - i)
    return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].view(-1)


def repackage_hidden(h):
    """Wraps hidden states in new Tensors, to detach them from their history."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def build(steps=6, batch=BATCH, bptt=BPTT):
    torch.manual_seed(1111)  # main.py's default seed
    ids = torch.randint(0, NTOKEN, (batch * (bptt * steps + 1),))  # corpus patch: no corpus file, `steps` batches
    return RNNModel("LSTM", NTOKEN, EMSIZE, NHID, NLAYERS, DROPOUT), batchify(ids, batch)


def train(model, train_data, step_end=lambda: None, bptt=BPTT):
    criterion = nn.NLLLoss()
    model.train()
    hidden = model.init_hidden(train_data.size(1))  # corpus patch: the batch the data was batchified by
    for i in range(0, train_data.size(0) - 1, bptt):
        data, targets = get_batch(train_data, i, bptt)
        model.zero_grad()
        hidden = repackage_hidden(hidden)
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-LR)
        step_end()  # corpus patch: where the profiler's step() goes
