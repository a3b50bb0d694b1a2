"""The one rule set, no TensorFlow: a variable's role, slot and layer (``roles``), a layer's
parameter derivation (``layers``), per-layer roll-ups (``rollup``), an op's layer and phase
(``join``), and which memory series keep growing (``growth``). Live capture, the readers and the
backend all decide these here."""
