"""Evaluate a syntax tree."""

import math
import operator

from tinycalc.errors import CalcError
from tinycalc.nodes import Binary, Call, Name, Number, Unary
from tinycalc.parser import parse

CONSTANTS = {"pi": math.pi, "e": math.e}
FUNCTIONS = {"abs": abs, "min": min, "max": max, "round": round, "sqrt": math.sqrt}
_BINARY = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "%": operator.mod,
    "^": operator.pow,
}


def evaluate(text, variables=None, functions=None):
    """Evaluate the expression ``text``.

    ``variables`` and ``functions`` add to (and override) the built-in constants and
    functions. Raises CalcError for any problem.
    """
    scope = {**CONSTANTS, **(variables or {})}
    callables = {**FUNCTIONS, **(functions or {})}
    return _evaluate(parse(text), scope, callables)


def _evaluate(node, scope, callables):
    if isinstance(node, Number):
        return node.value
    if isinstance(node, Name):
        if node.name not in scope:
            raise CalcError(f"unknown name {node.name!r}", node.position)
        return scope[node.name]
    if isinstance(node, Unary):
        value = _evaluate(node.operand, scope, callables)
        return -value if node.op == "-" else value
    if isinstance(node, Binary):
        left = _evaluate(node.left, scope, callables)
        right = _evaluate(node.right, scope, callables)
        return _BINARY[node.op](left, right)
    if isinstance(node, Call):
        if node.name not in callables:
            raise CalcError(f"unknown function {node.name!r}", node.position)
        args = [_evaluate(arg, scope, callables) for arg in node.args]
        try:
            return callables[node.name](*args)
        except (TypeError, ValueError) as error:
            raise CalcError(f"{node.name}(): {error}", node.position) from None
    raise TypeError(f"not a syntax tree node: {node!r}")
