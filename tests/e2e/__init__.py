"""End-to-end tier: a real tensorboard process (both loaders), Chromium, the demo script."""
