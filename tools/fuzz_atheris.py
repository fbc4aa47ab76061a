"""Coverage-guided fuzzing of the model readers with atheris (libFuzzer for Python), for long
local runs. atheris is not a dependency of the project: install it where you run this
(``pip install atheris``; a wheel exists for CPython 3.11 on x86-64 Linux).

Each input is the bytes of a model file, tried as a bare ``.mlmodel`` and as the root model of an
``.mlpackage`` (with a Manifest.json and no weights): loaded, saved and checked the way
``converter convert --check`` does, loops cut at 1,000 iterations and tensors at 64 MiB. A converter error is a fine
outcome; any other exception, or an error that says memory ran out, is a crash for libFuzzer to
report (it saves the input as ``crash-*``). Hangs and memory are libFuzzer's ``-timeout`` and
``-rss_limit_mb``. Mutations: libFuzzer's own, and half the time the project's structured protobuf
mutations (tests/hostile/mutate.py); the seeds are the shared models' model files.

    python tools/fuzz_atheris.py -max_total_time=1800 -timeout=10 -rss_limit_mb=2048 CORPUS_DIR
"""

from __future__ import annotations

import atexit
import json
import random
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import atheris  # noqa: E402

with atheris.instrument_imports(include=["converter"]):  # everything the readers may import, now
    import converter  # noqa: E402
    import converter.backends.mil  # noqa: E402, F401
    import converter.frontends.mil  # noqa: E402, F401
    from converter.check import compare  # noqa: E402
    from converter.errors import ConverterError  # noqa: E402
    from converter.frontends.neuralnetwork.registry import load_all  # noqa: E402

    load_all()

from tests.conftest import MODELS  # noqa: E402
from tests.hostile.harness import FUZZ_LOOP_LIMIT, FUZZ_TENSOR_BYTES, memory_words  # noqa: E402
from tests.hostile.mutate import PACKAGE_PARTS, mutate, sources  # noqa: E402

_WORK = Path(tempfile.mkdtemp(prefix="atheris-"))
atexit.register(shutil.rmtree, _WORK, True)
_MANIFEST = json.dumps({"fileFormatVersion": "1.0.0", "rootModelIdentifier": "M", "itemInfoEntries": {
    "M": {"author": "com.apple.CoreML", "name": "model.mlmodel", "path": "com.apple.CoreML/model.mlmodel"}}})


def _paths(data: bytes) -> list[Path]:
    bare = _WORK / "x.mlmodel"
    bare.write_bytes(data)
    pkg = _WORK / "x.mlpackage"
    (pkg / "Data" / "com.apple.CoreML").mkdir(parents=True, exist_ok=True)
    (pkg / "Manifest.json").write_text(_MANIFEST)
    (pkg / PACKAGE_PARTS[0]).write_bytes(data)
    return [bare, pkg]


def test_one_input(data: bytes) -> None:
    for path in _paths(data):
        out = _WORK / "out.mlpackage"
        try:
            prog = converter.load(path)
            converter.save(prog, out)
            compare(prog, converter.load(out), max_loop_iterations=FUZZ_LOOP_LIMIT,
                    max_tensor_bytes=FUZZ_TENSOR_BYTES)
        except ConverterError as e:
            if memory_words(str(e)):
                raise RuntimeError(f"an allocation was refused: {e}") from e


def custom_mutator(data: bytes, max_size: int, seed: int) -> bytes:
    rng = random.Random(seed)
    if rng.random() < 0.5:
        return atheris.Mutate(data, max_size)
    out, _ = mutate(data, "proto", rng)
    return out[:max_size]


def _seed_corpus(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for rel in sources():
        src = MODELS / rel
        model = src / PACKAGE_PARTS[0] if src.is_dir() else src
        target = folder / f"seed-{rel.replace('/', '_')}"
        if not target.exists() and model.stat().st_size <= 1 << 20:
            target.write_bytes(model.read_bytes())


if __name__ == "__main__":
    corpus = [a for a in sys.argv[1:] if not a.startswith("-")]
    if corpus:
        _seed_corpus(Path(corpus[0]))
    atheris.Setup(sys.argv, test_one_input, custom_mutator=custom_mutator)
    atheris.Fuzz()
