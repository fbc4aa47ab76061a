"""Source programs of the optimization baselines (issue 8, "Done when", quality (a) and speed).

Each source is a torch module (tests/optimize/torch_models.py) traced and converted by coremltools
twice, to fp32 ML programs for iOS15:

- ``empty.mlpackage``: ``pass_pipeline=ct.PassPipeline.EMPTY``, the raw program coremltools' torch
  frontend makes (coremltools still runs the frontend and backend passes its default pipeline does
  not also hold: ``torch_upsample_to_core_upsample``, ``torch_tensor_assign_to_core``,
  ``adjust_io_to_supported_types``, ``insert_image_preprocessing_ops``, ``fuse_activation_silu``,
  ``fuse_pow2_sqrt``, ``sanitize_name_strings``, ``handle_unused_inputs``). Our default pipeline
  runs on exactly this program (``converter.load`` of it).
- ``default.mlpackage``: ``ct.PassPipeline.DEFAULT``, what a coremltools user gets; its op count is
  the bar ours must not exceed.

Beside them: ``inputs.npz`` (fixed random inputs keyed by input name) and ``torch_outputs.npz``
(torch's outputs on them, keyed by the models' output names ``output_0``...).

Nothing is committed: the files are built on first use into a cache folder, keyed by a hash of
this file, torch_models.py and the torch/coremltools versions (an edit rebuilds them). Building
is atomic (built beside, renamed into place) and serialised by a lock file, so parallel test
workers and benchmark runs share one copy.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
# Where the benchmarks keep the built sources (tests use pytest's cache folder instead).
DEFAULT_CACHE = Path(os.environ.get("CONVERTER_OPTIMIZE_CACHE",
                                    Path(tempfile.gettempdir()) / "converter-optimize-sources"))
OUTPUT_NAME = "output_0"


@dataclass(frozen=True)
class SourceSpec:
    """A torch module and the shapes of its inputs (fp32, random normal)."""

    name: str
    what: str
    make: Callable[[], Any]  # -> torch.nn.Module (weights seeded inside)
    inputs: dict[str, tuple[int, ...]]


def _seeded(factory: Callable[[], Any]) -> Callable[[], Any]:
    def make() -> Any:
        import torch

        from .torch_models import randomize_batch_norms

        torch.manual_seed(0)
        module = factory()
        randomize_batch_norms(module, torch.Generator().manual_seed(1))
        return module.eval()

    return make


def _specs() -> dict[str, SourceSpec]:
    from . import torch_models as tm

    specs = [
        SourceSpec("cnn_bn", "3 conv-bn-relu blocks, max/avg pooling, linear head", _seeded(tm.CnnBn),
                   {"x": (1, 3, 32, 32)}),
        SourceSpec("transformer_block", "pre-norm block: qkv split into heads, matmul attention, gelu MLP",
                   _seeded(tm.TransformerBlock), {"x": (1, 16, 32)}),
        SourceSpec("lstm", "2-layer batch-first LSTM, linear head on the last step", _seeded(tm.LstmModel),
                   {"x": (1, 12, 8)}),
        SourceSpec("gelu_layer_norm", "gelu exact/tanh and layer_norm as torch ops and written out by hand",
                   _seeded(tm.GeluLayerNorm), {"x": (4, 24)}),
        SourceSpec("resnet34", "torchvision's ResNet-34 layout at width 16, 64x64 input", _seeded(tm.ResNet),
                   {"x": (1, 3, 64, 64)}),
    ]
    return {s.name: s for s in specs}


SOURCE_NAMES = ("cnn_bn", "transformer_block", "lstm", "gelu_layer_norm", "resnet34")
# The ResNet-style program of the speed criterion.
RESNET = "resnet34"


def converted_both_ways(torch_dir: Path) -> list[str]:
    """Names of the shared torch models coremltools converted both to a NeuralNetwork
    (``<name>_nn.mlmodel``) and to an fp32 ML program (``<name>_mlprogram.mlpackage``)."""
    return sorted(p.name[: -len("_nn.mlmodel")] for p in torch_dir.glob("*_nn.mlmodel")
                  if (torch_dir / p.name.replace("_nn.mlmodel", "_mlprogram.mlpackage")).is_dir())


@dataclass(frozen=True)
class SourcePrograms:
    """The built files of one source."""

    name: str
    folder: Path

    @property
    def empty(self) -> Path:
        return self.folder / "empty.mlpackage"

    @property
    def default(self) -> Path:
        return self.folder / "default.mlpackage"

    def feeds(self) -> dict[str, np.ndarray]:
        with np.load(self.folder / "inputs.npz") as data:
            return {k: data[k] for k in data.files}

    def torch_outputs(self) -> dict[str, np.ndarray]:
        with np.load(self.folder / "torch_outputs.npz") as data:
            return {k: data[k] for k in data.files}


def cache_key() -> str:
    """Changes whenever the sources or the tools that build them change."""
    import coremltools as ct
    import torch

    h = hashlib.sha256()
    for f in ("sources.py", "torch_models.py"):
        h.update((HERE / f).read_bytes())
    h.update(f"torch {torch.__version__} coremltools {ct.__version__}".encode())
    return h.hexdigest()[:16]


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def build_sources(names: Iterable[str] = SOURCE_NAMES, cache: Path = DEFAULT_CACHE) -> dict[str, SourcePrograms]:
    """The built files of each named source, building what the cache does not hold yet."""
    root = cache / cache_key()
    out = {}
    for name in names:
        built = SourcePrograms(name, root / name)
        if not built.folder.is_dir():
            with _locked(root / f".{name}.lock"):
                if not built.folder.is_dir():  # another process may have built it meanwhile
                    _build(_specs()[name], built.folder)
        out[name] = built
    return out


def _quiet_coremltools() -> Any:
    warnings.simplefilter("ignore")
    logging.getLogger("coremltools").setLevel(logging.ERROR)
    import coremltools as ct

    return ct


def _build(spec: SourceSpec, folder: Path) -> None:
    import torch

    ct = _quiet_coremltools()
    module = spec.make()
    rng = np.random.default_rng(0)
    feeds = {k: rng.standard_normal(shape).astype(np.float32) for k, shape in spec.inputs.items()}
    example = tuple(torch.from_numpy(v) for v in feeds.values())
    with torch.no_grad():
        traced = torch.jit.trace(module, example)
        result = module(*example)
    results = result if isinstance(result, tuple) else (result,)
    refs = {f"output_{i}": r.numpy() for i, r in enumerate(results)}

    work = Path(tempfile.mkdtemp(prefix=f".{spec.name}-", dir=folder.parent))
    try:
        for stem, pipeline in (("empty", ct.PassPipeline.EMPTY), ("default", ct.PassPipeline.DEFAULT)):
            model = ct.convert(traced, convert_to="mlprogram", pass_pipeline=pipeline,
                               inputs=[ct.TensorType(name=k, shape=v.shape) for k, v in feeds.items()],
                               outputs=[ct.TensorType(name=k) for k in refs],
                               minimum_deployment_target=ct.target.iOS15,
                               compute_precision=ct.precision.FLOAT32, skip_model_load=True)
            model.save(str(work / f"{stem}.mlpackage"))
        np.savez(work / "inputs.npz", **feeds)
        np.savez(work / "torch_outputs.npz", **refs)
        os.rename(work, folder)
    finally:
        shutil.rmtree(work, ignore_errors=True)
