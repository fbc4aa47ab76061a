"""Issue 7: every change of an op's signature between opsets is handled by the re-targeting table,
in both directions, and the table stays well-formed. The changes are computed here from the MIL
signatures (ir/ops/signatures.json), so a regenerated signature file with a new change fails this
test until the change is classified."""

from __future__ import annotations

import itertools

from converter.ir.opdef import OPSETS, get_opdef, mil_op_types, opset_index, opsets_of, versions_of
from converter.passes.retarget.generic import ADDED_PARAMETERS
from converter.passes.retarget.table import RULES, find_rule

# Parameters added or removed that a specific rule (not ADDED_PARAMETERS) handles.
RULE_HANDLED_PARAMETERS = {("crop_resize", "boxes"), ("crop_resize", "box_indices"), ("crop_resize", "roi"),
                           ("non_maximum_suppression", "score_threshold"), ("constexpr_lut_to_dense", "shape"),
                           ("constexpr_lut_to_dense", "vector_axis"), ("constexpr_sparse_to_dense", "shape")}


def _spans(op: str) -> dict[str, list[str]]:
    """Version ("since" opset) -> the opsets in which that version is the op's definition."""
    out: dict[str, list[str]] = {}
    for opset in opsets_of(op):
        out.setdefault(get_opdef(op, opset).signature.since, []).append(opset)
    return out


def _shape_of(op: str, since: str) -> dict[str, tuple]:
    """What a rule must handle: parameter names, kinds, optionality, constness and literal defaults
    (dtype sets and type domains are the generic step's)."""
    sig = get_opdef(op, since).signature
    return {s.name: (s.kind, s.optional, s.const, repr(s.default)) for s in sig.value_inputs()}


def changes() -> list[tuple[str, str, str]]:
    """(op, version, other version) for every op whose signature changed, both directions."""
    out = []
    for op in mil_op_types():
        try:
            versions = versions_of(op)
            get_opdef(op, versions[0])
        except Exception:  # noqa: BLE001 - MIL ops without a definition here cannot be re-targeted
            continue
        out += [(op, a, b) for a, b in itertools.permutations(versions, 2)]
    return out


def test_every_signature_change_has_a_rule_or_is_dtype_only():
    missing = []
    for op, a, b in changes():
        spans = _spans(op)
        structural = _shape_of(op, a) != _shape_of(op, b)
        for source, target in itertools.product(spans[a], spans[b]):
            if structural and find_rule(op, source, target) is None:
                missing.append(f"{op} {source}->{target}")
    assert not missing, f"signature changes without a re-targeting rule: {missing}"


def test_every_added_optional_parameter_is_classified():
    unclassified = []
    for op, a, b in changes():
        if opset_index(a) > opset_index(b):
            continue
        old, new = _shape_of(op, a), _shape_of(op, b)
        for name in set(new) - set(old):
            if (op, name) not in ADDED_PARAMETERS and (op, name) not in RULE_HANDLED_PARAMETERS:
                unclassified.append(f"{op}.{name} ({b})")
        for name in set(old) - set(new):
            if (op, name) not in RULE_HANDLED_PARAMETERS:
                unclassified.append(f"{op}.{name} removed in {b}")
    assert not unclassified, unclassified
    for (op, name), added in ADDED_PARAMETERS.items():
        assert name in get_opdef(op, added.since).signature.inputs, (op, name)
        before = OPSETS[opset_index(added.since) - 1]
        assert name not in get_opdef(op, before).signature.inputs, (op, name)


def test_rules_do_not_overlap_and_name_real_ops():
    for rule in RULES:
        assert rule.op_type in mil_op_types(), rule.op_type
        assert rule.summary
    for op in {r.op_type for r in RULES}:
        for source, target in itertools.product(OPSETS, OPSETS):
            hits = [r for r in RULES if r.op_type == op and r.matches(source, target)]
            assert len(hits) <= 1, (op, source, target, [h.summary for h in hits])
