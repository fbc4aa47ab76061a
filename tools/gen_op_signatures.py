"""Regenerate converter/ir/ops/signatures.json from the MIL op reference.

The reference (``../shared/reference/mil-ops.json``) lists every MIL op of opsets iOS15-iOS18 with
its exact parameter names, kinds, allowed dtypes, constness and defaults, one record per
(op, opset). We keep one record per *version* of an op (the opset where it first appears, and each
opset where its signature changed), which is all the registry needs to resolve (op, opset).

Usage: python tools/gen_op_signatures.py [path/to/mil-ops.json]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = ROOT.parent / "shared" / "reference" / "mil-ops.json"
TARGET = ROOT / "converter" / "ir" / "ops" / "signatures.json"
OPSETS = ["iOS15", "iOS16", "iOS17", "iOS18"]
KINDS = {
    "TensorInputType": "tensor",
    "TupleInputType": "tuple",
    "ListInputType": "list",
    "InternalInputType": "internal",
    "PyFunctionInputType": "block",
    "ListOrTensorOrDictInputType": "any",
    "StateInputType": "state",
}


def convert_input(inp: dict) -> dict:
    out = {
        "name": inp["name"],
        "kind": KINDS[inp["kind"]],
        "optional": bool(inp["optional"]),
        "const": bool(inp["const"]),
    }
    if "types" in inp:
        out["types"] = list(inp["types"])
    if "type_domain_id" in inp:
        out["domain"] = inp["type_domain_id"]
    if "default" in inp:
        d = inp["default"]
        if isinstance(d, str) and d.startswith("expr:"):
            d = {"expr": d[len("expr:") :]}
        out["default"] = d
    return out


def build(source: Path) -> dict:
    data = json.loads(source.read_text())
    by_op: dict[str, dict[str, dict]] = {}
    for rec in data["ops"]:
        by_op.setdefault(rec["op"], {})[rec["opset"]] = rec
    ops = {}
    for name in sorted(by_op):
        versions = []
        for opset in OPSETS:
            rec = by_op[name].get(opset)
            if rec is None:
                continue
            entry = {
                "since": opset,
                "defined_in": rec["defined_in"],
                "type_domains": rec["type_domains"],
                "inputs": [convert_input(i) for i in rec["inputs"]],
            }
            if versions and {k: v for k, v in entry.items() if k != "since"} == {
                k: v for k, v in versions[-1].items() if k != "since"
            }:
                continue
            versions.append(entry)
        ops[name] = versions
    return {
        "source": "coremltools " + data["coremltools_version"] + " op registry (../shared/reference/mil-ops.json)",
        "opsets": OPSETS,
        "ops": ops,
    }


def render(source: Path = DEFAULT_SOURCE) -> str:
    return json.dumps(build(source), indent=1, sort_keys=False) + "\n"


def main() -> None:
    source = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_SOURCE
    TARGET.write_text(render(source))
    print(f"wrote {TARGET}")


if __name__ == "__main__":
    main()
