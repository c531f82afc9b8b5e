"""Mutators: the directive mutator (offline) and the LLM mutators (diff, full, cross)."""
