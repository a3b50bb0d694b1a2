"""PyTorch training scripts as people write them (a plain loop, Hugging Face ``Trainer``, Lightning), each
modelled on a public example (``SOURCES.md``), run by ``tests.corpus.pytorch.run`` with ground truth read
from the live objects."""
