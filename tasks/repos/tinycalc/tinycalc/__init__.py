"""A tiny, safe arithmetic expression evaluator."""

from tinycalc.errors import CalcError
from tinycalc.evaluator import evaluate
from tinycalc.parser import parse
from tinycalc.tokens import tokenize

__all__ = ["CalcError", "evaluate", "parse", "tokenize"]
