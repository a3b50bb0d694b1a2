"""Unit tier: no TensorFlow (blocked from import, see conftest.py), no subprocess, no training."""
