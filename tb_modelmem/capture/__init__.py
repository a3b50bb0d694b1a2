"""Live capture, which needs TensorFlow: a model's variables (``variables``), a tf.function's graphs
(``opgraph``) and the process's memory (``process``). Everything here runs in the training process."""
