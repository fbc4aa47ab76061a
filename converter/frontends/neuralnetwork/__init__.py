"""NeuralNetwork (.mlmodel) frontend: every layer kind, legacy rank-5 and ND semantics."""

from .context import Options
from .model import load_neural_network

__all__ = ["Options", "load_neural_network"]
