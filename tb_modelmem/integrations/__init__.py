"""Callbacks for the trainers people run PyTorch with: ``transformers`` (Hugging Face ``Trainer``) and
``lightning`` (PyTorch Lightning). Each module imports its library when it is imported itself, never
through ``import tb_modelmem``; both drive ``tb_modelmem.pytorch.Profile``."""
