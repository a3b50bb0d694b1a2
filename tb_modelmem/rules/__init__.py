"""The one rule set, no TensorFlow: a variable's role, slot and layer (``roles``), a layer's
parameter derivation (``layers``), per-layer roll-ups (``rollup``), an op's layer and phase
(``join``), a step buffer's category and whether it carries the batch (``buffers``), the peak
split and the resident state (``peak``), What-if (``projection``) and which memory series keep
growing (``growth``). Live capture, the readers and the backend all decide these here."""
