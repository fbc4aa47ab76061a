"""Benchmark: op counts of our default pipeline next to coremltools' (issue 8, quality).

Counts are ops other than ``const``, nested blocks included (tests/optimize/counting.py; our count
and coremltools' agree on the same file, tests/optimize/test_sources.py).

(a) Per source program (tests/optimize/sources.py: torch modules converted by coremltools with
    ``PassPipeline.EMPTY`` and with ``PassPipeline.DEFAULT``): ops of the EMPTY program, after
    coremltools' default pipeline, and after ours (``converter.optimize(prog, pipeline="default")``
    on ``converter.load`` of the EMPTY package; "n/a" while the tree has no ``converter.optimize``).
(b) Per torch model of ../shared/data/models/torch/ converted both ways by coremltools: our
    migrated NeuralNetwork model (``converter.load`` of ``<name>_nn.mlmodel``) before and after our
    pipeline, next to coremltools' direct torch -> ML program conversion (``<name>_mlprogram.mlpackage``).

    Also, as a yardstick for (b): coremltools' default pipeline run on our migrated program (written
    with our MIL backend, read by coremltools' MIL proto loader), "ct on ours".

(shared) With ``--shared`` instead: every model of ../shared/data/models/ (builder/, real/, torch/:
    each ``.mlmodel`` file and ``.mlpackage``) that ``converter.load`` reads, NeuralNetwork and ML
    program alike: its ops (other than const, nested blocks included) before and after our default
    pipeline, and for a torch/ model coremltools' ML program of the same source beside it
    (``<name>_mlprogram.mlpackage``, counted the same way); a markdown table, then the models
    ``converter.load`` refuses and why.

    python benchmarks/op_count.py [--histograms] [--passes] [--json OUT.json]
    python benchmarks/op_count.py --shared [--json OUT.json]

``--histograms`` also prints each program's op histogram and, per program, the op types ours has
more of than coremltools' result (what is left for the passes to remove). ``--passes`` prints, per
program, which coremltools pass removed or added which ops (each pass that changed the histogram).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
import tempfile
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
MODELS = Path(os.environ.get("CONVERTER_SHARED", ROOT.parent / "shared")) / "data" / "models"  # as the tests
TORCH = MODELS / "torch"


def histogram_text(h: Counter[str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(h.items(), key=lambda kv: (-kv[1], kv[0])))


def excess(ours: Counter[str], theirs: Counter[str]) -> str:
    """Op types of ``ours`` beyond ``theirs`` (and the reverse), e.g. "batch_norm +3; gelu -2"."""
    keys = sorted(set(ours) | set(theirs), key=lambda k: (-(abs(ours[k] - theirs[k])), k))
    return "; ".join(f"{k} {ours[k] - theirs[k]:+d}" for k in keys if ours[k] != theirs[k]) or "same histogram"


def optimized(prog: Any) -> tuple[Any, str | None]:
    """(the program after our default pipeline, None) or (the program as it was, why not)."""
    import converter

    optimize = getattr(converter, "optimize", None)
    if optimize is None:
        return prog, "not available yet (no converter.optimize)"
    try:
        optimize(prog, pipeline="default")
    except Exception as e:  # noqa: BLE001 - a failure is reported per program, the rest still runs
        return prog, f"failed: {type(e).__name__}: {e}"
    return prog, None


def load(path: Path) -> tuple[Any, str | None]:
    import converter

    try:
        return converter.load(path), None
    except Exception as e:  # noqa: BLE001 - reported per program
        return None, f"converter.load fails: {type(e).__name__}: {e}"


def effects_text(effects: list[tuple[str, dict[str, int]]]) -> str:
    return "\n".join(f"      {name.split('::')[-1]}: " + ", ".join(f"{k} {v:+d}" for k, v in delta.items())
                     for name, delta in effects) or "      (no pass changed the ops)"


def part_a(histograms: bool, passes: bool) -> list[dict[str, Any]]:
    from tests.optimize.coremltools_passes import pass_effects
    from tests.optimize.counting import ct_load, ct_op_histogram, op_histogram
    from tests.optimize.sources import SOURCE_NAMES, build_sources

    rows = []
    print("(a) raw programs coremltools makes with PassPipeline.EMPTY\n")
    print(f"{'source':<20}{'EMPTY':>8}{'ct default':>12}{'ours':>8}  note")
    for name, src in build_sources(SOURCE_NAMES).items():
        empty_h = ct_op_histogram(ct_load(src.empty))
        ct_h = ct_op_histogram(ct_load(src.default))
        prog, note = load(src.empty)
        ours_h = None
        if prog is not None:
            prog, note = optimized(prog)
            ours_h = op_histogram(prog)
        ours = "n/a" if ours_h is None or note else str(sum(ours_h.values()))
        print(f"{name:<20}{sum(empty_h.values()):>8}{sum(ct_h.values()):>12}{ours:>8}  {note or ''}")
        rows.append({"source": name, "empty": dict(empty_h), "coremltools_default": dict(ct_h),
                     "ours": dict(ours_h) if ours_h is not None and not note else None, "note": note,
                     "coremltools_passes": pass_effects(ct_load(src.empty)) if passes else None})
    if histograms or passes:
        for r in rows:
            empty, ct_h = Counter(r["empty"]), Counter(r["coremltools_default"])
            print(f"\n  {r['source']}\n    EMPTY:      {histogram_text(empty)}\n    ct default: {histogram_text(ct_h)}"
                  f"\n    EMPTY - ct default: {excess(empty, ct_h)}")
            if passes:
                print(f"    coremltools passes on EMPTY:\n{effects_text(r['coremltools_passes'])}")
            if r["ours"] is not None:
                print(f"    ours:       {histogram_text(Counter(r['ours']))}\n"
                      f"    ours - ct default: {excess(Counter(r['ours']), ct_h)}")
    return rows


def coremltools_on_ours(prog: Any, work: Path) -> tuple[Counter[str], list[tuple[str, dict[str, int]]]]:
    """(histogram, per-pass effects) of coremltools' default pipeline run on one of our programs."""
    import converter
    from tests.optimize.coremltools_passes import pass_effects
    from tests.optimize.counting import ct_load, ct_op_histogram

    theirs = ct_load(converter.save(prog, work / "ours.mlpackage", overwrite=True))
    effects = pass_effects(theirs)
    return ct_op_histogram(theirs), effects


def part_b(histograms: bool, passes: bool) -> list[dict[str, Any]]:
    from tests.optimize.counting import op_histogram
    from tests.optimize.sources import converted_both_ways

    rows = []
    print("\n(b) shared torch models: our migrated NeuralNetwork model vs coremltools' torch -> ML program\n")
    print(f"{'model':<28}{'ours (NN)':>10}{'after ours':>12}{'ct mlprogram':>14}{'ct on ours':>12}  note")
    work = Path(tempfile.mkdtemp(prefix="op_count-"))
    for name in converted_both_ways(TORCH):
        prog, note = load(TORCH / f"{name}_nn.mlmodel")
        before = op_histogram(prog)
        ct_on_ours, effects = coremltools_on_ours(prog, work)
        prog, note = optimized(prog)
        after = None if note else op_histogram(prog)
        theirs, _ = load(TORCH / f"{name}_mlprogram.mlpackage")
        ct_h = op_histogram(theirs)
        shown = "n/a" if after is None else str(sum(after.values()))
        print(f"{name:<28}{sum(before.values()):>10}{shown:>12}{sum(ct_h.values()):>14}"
              f"{sum(ct_on_ours.values()):>12}  {note or ''}")
        rows.append({"model": name, "ours_nn": dict(before), "ours_after": dict(after) if after else None,
                     "coremltools_mlprogram": dict(ct_h), "coremltools_on_ours": dict(ct_on_ours),
                     "coremltools_passes_on_ours": effects, "note": note})
    for p in sorted(work.rglob("*"), reverse=True):  # only what this run wrote
        p.unlink() if p.is_file() else p.rmdir()
    work.rmdir()
    if histograms or passes:
        for r in rows:
            before, ct_h = Counter(r["ours_nn"]), Counter(r["coremltools_mlprogram"])
            print(f"\n  {r['model']}\n    ours (NN):    {histogram_text(before)}\n"
                  f"    ct mlprogram: {histogram_text(ct_h)}\n    ours - ct: {excess(before, ct_h)}\n"
                  f"    ct on ours:   {histogram_text(Counter(r['coremltools_on_ours']))}")
            if passes:
                print(f"    coremltools passes on ours:\n{effects_text(r['coremltools_passes_on_ours'])}")
            if r["ours_after"] is not None:
                after = Counter(r["ours_after"])
                print(f"    after ours:   {histogram_text(after)}\n    after ours - ct: {excess(after, ct_h)}")
    return rows


def shared_models() -> list[Path]:
    """Every model file of ../shared/data/models/ (one level below it), in name order."""
    out = []
    for folder in sorted(p for p in MODELS.iterdir() if p.is_dir()):
        out += sorted(p for p in folder.iterdir()
                      if (p.suffix == ".mlmodel" and p.is_file()) or (p.suffix == ".mlpackage" and p.is_dir()))
    return out


def torch_counterpart(path: Path) -> Path | None:
    """coremltools' fp32 ML program of the torch source ``path`` was converted from (None if none)."""
    if path.parent.name != "torch":
        return None
    for suffix in ("_nn.mlmodel", "_mlprogram_fp16.mlpackage", "_mlprogram.mlpackage", "_export_mlprogram.mlpackage"):
        if path.name.endswith(suffix):
            theirs = path.with_name(path.name[: -len(suffix)] + "_mlprogram.mlpackage")
            return theirs if theirs.exists() else None
    return None


def part_shared() -> list[dict[str, Any]]:
    import time

    import converter
    from converter.formats.model_file import read_model_file
    from converter.ir.core import Program
    from tests.optimize.counting import op_count

    converter.optimize(Program())  # import the passes before the first timing
    rows, refused = [], []
    for path in shared_models():
        name = str(path.relative_to(MODELS))
        prog, why = load(path)
        if prog is None:
            why = re.sub(r"file '[^']*'[,:] ", "", why.splitlines()[0].replace("converter.load fails: ", ""))
            refused.append((name, why))
            continue
        kind = "MIL" if read_model_file(path).model.WhichOneof("Type") == "mlProgram" else "NN"
        before = op_count(prog)
        t = time.perf_counter()
        prog, note = optimized(prog)
        seconds = time.perf_counter() - t
        after = None if note else op_count(prog)
        theirs_path = torch_counterpart(path)
        theirs = None
        if theirs_path is not None:
            ct_prog, _ = load(theirs_path)
            theirs = op_count(ct_prog) if ct_prog is not None else None
        rows.append({"model": name, "kind": kind, "before": before, "after": after, "coremltools_mlprogram": theirs,
                     "seconds": seconds, "note": note})
    print("| model | kind | ops before | ops after | removed | coremltools ML program | pipeline ms | note |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for r in rows:
        after = "failed" if r["after"] is None else str(r["after"])
        removed = "" if r["after"] is None else str(r["before"] - r["after"])
        theirs = "" if r["coremltools_mlprogram"] is None else str(r["coremltools_mlprogram"])
        print(f"| {r['model']} | {r['kind']} | {r['before']} | {after} | {removed} | {theirs} | "
              f"{r['seconds'] * 1e3:.1f} | {r['note'] or ''} |")
    done = [r for r in rows if r["after"] is not None]
    print(f"| **total ({len(done)} models)** | | {sum(r['before'] for r in done)} | {sum(r['after'] for r in done)} | "
          f"{sum(r['before'] - r['after'] for r in done)} | | {sum(r['seconds'] for r in done) * 1e3:.0f} | |")
    print(f"\n{len(rows)} models read; not read by converter.load ({len(refused)}):")
    for name, why in refused:
        print(f"- {name}: {why}")
    return rows + [{"model": name, "refused": why} for name, why in refused]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--histograms", action="store_true", help="print op histograms and their differences")
    ap.add_argument("--passes", action="store_true", help="print what each coremltools pass changed")
    ap.add_argument("--json", type=Path, help="also write every histogram here")
    ap.add_argument("--shared", action="store_true",
                    help="instead: every shared model converter.load reads, ops before/after (a markdown table)")
    args = ap.parse_args()
    os.environ.setdefault("TQDM_DISABLE", "1")  # before tqdm is imported (coremltools' progress bars)
    warnings.simplefilter("ignore")
    logging.getLogger("coremltools").setLevel(logging.ERROR)
    if args.shared:
        result: dict[str, Any] = {"shared": part_shared()}
    else:
        result = {"a": part_a(args.histograms, args.passes), "b": part_b(args.histograms, args.passes)}
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
