"""Core ML protobuf schemas (package ``CoreML.Specification``) and their generated Python modules.

``Model_pb2.Model`` is the root message of an ``.mlmodel`` file; ``NeuralNetwork_pb2`` and
``MIL_pb2`` hold the two model bodies the converter reads and writes. The ``.proto`` sources beside
this file are the reference; ``*_pb2.py`` are generated from them by ``tools/gen_protos.py``
(``NeuralNetwork.proto`` itself is extracted from Apple's annotated spec by
``tools/extract_nn_proto.py``) and must not be edited by hand.

The modules register their descriptors in :data:`POOL`, a descriptor pool private to this
package, not in protobuf's default pool: coremltools' generated modules use the same file and
message names, and both sets must be importable in one process (coremltools is a test oracle).
Messages convert between the two through bytes (``SerializeToString`` / ``FromString``).

Model types the converter does not handle (tree ensembles, GLMs, SVMs, Vision and Natural
Language models, ...) are declared as empty messages, so ``Model.WhichOneof("Type")`` names every
model type while the content of those models is kept as unknown fields and written back unchanged.
"""

from google.protobuf import descriptor_pool as _descriptor_pool

#: The descriptor pool of every module in this package (see the module docstring).
POOL = _descriptor_pool.DescriptorPool()
