"""Named pipelines and the registry of passes ``--passes`` knows.

A pipeline is a list of pass objects, built fresh by a function (passes may keep state between
runs of one pipeline, never across pipelines). ``default`` is for MIL output; ``webnn`` and
``neuralnetwork`` start as its target-independent part and grow with their backends; ``none`` is
empty. `resolve` turns what a user writes into passes: a pipeline name, or ``a,b,c`` where each
is a pass of `PASSES` or a single rewrite rule of one of them (run alone as a rewrite pass).

To add a pass: give it a ``name``, add a factory to `PASSES`, and put it in the pipelines it
belongs to. A new rule set is a `RewritePass` (converter/passes/rewrite); its rules become
addressable by name automatically.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..errors import UnsupportedError
from .base import Pass, PassManager
from .canonicalize import Canonicalize
from .cse import CommonSubexpressionElimination
from .dce import DeadCodeElimination
from .fold_constants import FoldConstants
from .fusions.activation_family import FuseActivations, FuseNormalizations
from .fusions.conv_family import FuseConvFamily, FuseGlobalPool
from .rewrite import RewritePass, Rule
from .scaffolding import RemoveScaffolding
from .unroll import UnrollControlFlow

#: every pass ``--passes`` can name: name -> factory
PASSES: dict[str, Callable[[], Pass]] = {
    "canonicalize": Canonicalize,
    "cse": CommonSubexpressionElimination,
    "dead_code": DeadCodeElimination,
    "fold_constants": FoldConstants,
    "fuse_conv": FuseConvFamily,
    "fuse_global_pool": FuseGlobalPool,
    "fuse_activations": FuseActivations,
    "fuse_normalizations": FuseNormalizations,
    "remove_scaffolding": RemoveScaffolding,
    "unroll_control_flow": UnrollControlFlow,
}

#: rounds of a fixed-point pipeline at most (a round that changes nothing ends it earlier)
MAX_ROUNDS = 4


def generic_pipeline() -> list[Pass]:
    """The target-independent cleanup every backend wants."""
    return [RemoveScaffolding(), FoldConstants(), Canonicalize(), FuseConvFamily(), CommonSubexpressionElimination(),
            DeadCodeElimination()]


def default_pipeline() -> list[Pass]:
    """For MIL output."""
    return [*generic_pipeline(), FuseActivations(), FuseNormalizations()]


def webnn_pipeline() -> list[Pass]:
    """For WebNN output: fusions to ops WebNN has (gelu, layerNormalization, instanceNormalization,
    leakyRelu, prelu, clamp, softplus, softsign) and global pooling as a reduction."""
    generic = [FoldConstants(keep_fp16_weights=True) if isinstance(p, FoldConstants) else p for p in generic_pipeline()]
    return [*generic, FuseActivations(), FuseNormalizations(), FuseGlobalPool()]


def neuralnetwork_pipeline() -> list[Pass]:
    """For NeuralNetwork output: the fusions to layers that exist (gelu, leakyReLU, PReLU, clip for
    relu6, softplus, softsign, layerNormalization, batchnorm for instance_norm) and global pooling
    as a pooling layer; conv/innerProduct biases and batch norms are folded by ``fuse_conv``; casts
    of fp16 constants to fp32 are not folded (the layers keep fp16 weights as float16Value)."""
    generic = [FoldConstants(keep_fp16_weights=True) if isinstance(p, FoldConstants) else p for p in generic_pipeline()]
    return [*generic, FuseActivations(), FuseNormalizations(), FuseGlobalPool()]


PIPELINES: dict[str, Callable[[], list[Pass]]] = {
    "default": default_pipeline,
    "none": list,
    "webnn": webnn_pipeline,
    "neuralnetwork": neuralnetwork_pipeline,
}


def rules_of(passes: Sequence[Pass]) -> list[Rule]:
    """The rules of the rewrite passes among ``passes``, in order (each once)."""
    out: dict[str, Rule] = {}
    for p in passes:
        if isinstance(p, RewritePass):
            for r in p.rules:
                out.setdefault(r.name, r)
    return list(out.values())


def all_rules() -> dict[str, Rule]:
    """Every rule of the registered rewrite passes, by name."""
    out: dict[str, Rule] = {}
    for factory in PASSES.values():
        p = factory()
        if isinstance(p, RewritePass):
            for r in p.rules:
                out.setdefault(r.name, r)
    return out


def resolve(spec: str | Sequence[Pass] | None) -> list[Pass]:
    """The passes ``spec`` names: a pipeline name (None: ``default``), a comma-separated list of
    pass or rule names, or a list of pass objects (returned as given)."""
    if spec is None:
        spec = "default"
    if not isinstance(spec, str):
        return list(spec)
    key = spec.strip()
    if key in PIPELINES:
        return PIPELINES[key]()
    names = [n.strip() for n in key.split(",") if n.strip()]
    if not names:
        raise UnsupportedError(f"no passes named in '{spec}'")
    rules: dict[str, Rule] | None = None
    out: list[Pass] = []
    for n in names:
        if n in PASSES:
            out.append(PASSES[n]())
            continue
        if rules is None:
            rules = all_rules()
        if n in rules:
            out.append(RewritePass(n, [rules[n]]))
            continue
        raise UnsupportedError(f"unknown pass '{n}' (pipelines: {', '.join(PIPELINES)}; passes: "
                               f"{', '.join(PASSES)}; or a rule name, e.g. {next(iter(rules), '-')})")
    return out


def manager(spec: str | Sequence[Pass] | None = "default", *, verify_each: bool = False) -> PassManager:
    """A PassManager running ``spec`` (see `resolve`) to a fixed point (at most `MAX_ROUNDS` rounds)."""
    return PassManager(resolve(spec), fixed_point=True, max_iterations=MAX_ROUNDS, verify_each=verify_each)
