"""Fusions: rewrite rules that turn a decomposed computation into the one op that computes it.

One module per fusion (its IR before and after in the module docstring), grouped into rewrite
passes by family (conv/linear, activations/normalizations), which `passes/pipelines.py` lists.
"""
