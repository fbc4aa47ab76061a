"""Passes: programs changed in place, one job per pass.

base.py (Pass, PassResult, PassManager with statistics and verify_each), pipelines.py (named
pipelines and the registry --passes reads), edits.py (batched op-order edits, function-output-safe
value replacement), rewrite/ (the rule engine: pattern, check with a reason, replacement; its
docstring is the guide for rule writers), fold_constants.py, canonicalize/ (one module per topic), cse.py,
dce.py, fusions/ (one module per fusion, grouped into passes by family), retarget/.
"""
