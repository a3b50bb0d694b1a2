"""What the tests share: harnesses, fixtures that make traces and profiles, and the worker scripts
they run in a fresh process (``python -m tests.support.<worker>``)."""
