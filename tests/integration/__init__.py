"""Integration tier: real TensorFlow, torch and JAX runs, and the corpus of training scripts."""
