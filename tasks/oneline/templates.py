"""The one-line family's four templates (dials, labels, switches, tallies) and its names.

Each template turns a made-up name into a `Defect`: the module as fixed and as shipped, the
issue's symptom, a base test and the new test. build.py writes, verifies and splits them.
"""

from __future__ import annotations

import builtins
import keyword
import random
import textwrap
from dataclasses import dataclass

from deepswe_jax.agent.scripted_policy import FileEdit, minimal_edit

SEED = 15

CONSONANTS, VOWELS = "bdfgklmnprstvz", "aeiou"
# Two-digit numbers, a quarter of them held out (the dials' constants are drawn from these).
NUMBERS = list(range(11, 100))
HELD_OUT_NUMBERS = frozenset(random.Random(SEED + 1).sample(NUMBERS, len(NUMBERS) // 4))
TALLY_FUNCTIONS = ("len", "max", "min", "sum")


def names(count: int) -> tuple[str, ...]:
    """`count` made-up words of two or three consonant-vowel syllables (seeded, sorted)."""
    rng = random.Random(SEED)
    chosen: set[str] = set()
    while len(chosen) < count:
        syllables = rng.choice((2, 3))
        word = "".join(rng.choice(CONSONANTS) + rng.choice(VOWELS) for _ in range(syllables))
        if not keyword.iskeyword(word) and word not in dir(builtins):
            chosen.add(word)
    return tuple(sorted(chosen))


def held_out_names(all_names: tuple[str, ...], every: int) -> frozenset[str]:
    """Every `every`-th name of a seeded shuffle."""
    return frozenset(random.Random(SEED).sample(all_names, len(all_names))[::every])


@dataclass(frozen=True)
class Defect:
    """One task before it is a jsonl row: the module as fixed and as shipped, the issue, tests."""

    repo: str
    name: str
    split: str
    fixed_module: str
    wrong_line: str
    right_line: str
    symptom: str
    base_test: str
    new_test: str

    @property
    def module_path(self) -> str:
        return f"{self.repo}/{self.name}.py"

    @property
    def shipped_module(self) -> str:
        return self.fixed_module.replace(self.right_line, self.wrong_line)

    @property
    def replacement(self) -> FileEdit:
        """The str_replace the issue spells out: only the words that change
        (`scripted_policy.minimal_edit`, what the scripted expert's "edit" script types)."""
        edit = FileEdit(self.module_path, self.wrong_line + "\n", self.right_line + "\n")
        return minimal_edit(edit)

    @property
    def problem_statement(self) -> str:
        edit = self.replacement
        return (
            f"{self.symptom} In /testbed/{self.module_path}, replace `{edit.old}` with "
            f"`{edit.new}`.\n"
        )


def module(docstring: str, body: str) -> str:
    return f'"""{docstring}"""\n\n{textwrap.dedent(body).strip()}\n'


def dial(name: str, split: str, rng: random.Random) -> Defect:
    """A constant with the wrong number."""
    pool = [n for n in NUMBERS if (n in HELD_OUT_NUMBERS) == (split == "held_out")]
    wrong, right = rng.sample(pool, 2)
    constant, function = f"{name.upper()}_STEP", f"{name}_dial"
    fixed = module(
        f"The {name} dial.",
        f'''
        {constant} = {right}


        def {function}(turns):
            """Position of the {name} dial after `turns` turns."""
            return {constant} * turns
        ''',
    )
    return Defect(
        "dials",
        name,
        split,
        fixed,
        f"{constant} = {wrong}",
        f"{constant} = {right}",
        f"{function}(2) returns {2 * wrong} but should return {2 * right}.",
        f"def test_{function}_at_rest():\n    assert {function}(0) == 0\n",
        f"def test_{function}_two_turns():\n    assert {function}(2) == {2 * right}\n",
    )


def tally(name: str, split: str, rng: random.Random) -> Defect:
    """A call of the wrong builtin (len, max, min or sum)."""
    wrong, right = rng.sample(TALLY_FUNCTIONS, 2)
    function = f"{name}_tally"
    result = lambda f, v: getattr(builtins, f)(v)  # noqa: E731
    values = rng.sample(range(2, 10), 3)
    while result(wrong, values) == result(right, values):
        values = rng.sample(range(2, 10), 3)
    same = [1] if "len" in (wrong, right) else [rng.randrange(2, 10)]  # where both agree
    fixed = module(
        f"Tallies of the {name}.",
        f'''
        def {function}(values):
            """The {name} tally of `values`."""
            return {right}(values)
        ''',
    )
    return Defect(
        "tallies",
        name,
        split,
        fixed,
        f"    return {wrong}(values)",
        f"    return {right}(values)",
        f"{function}({values}) returns {result(wrong, values)} but should return "
        f"{result(right, values)}.",
        f"def test_{function}_single():\n    assert {function}({same}) == {result(right, same)}\n",
        f"def test_{function}_three():\n    assert {function}({values}) == {result(right, values)}\n",
    )


def switch(name: str, split: str, rng: random.Random) -> Defect:
    """A flag with the wrong truth value."""
    right = rng.choice((True, False))
    constant, function = f"{name.upper()}_ENABLED", f"{name}_enabled"
    fixed = module(
        f"The {name} switch.",
        f'''
        {constant} = {right}


        def {function}():
            """Whether the {name} is switched on."""
            return {constant}
        ''',
    )
    return Defect(
        "switches",
        name,
        split,
        fixed,
        f"{constant} = {not right}",
        f"{constant} = {right}",
        f"{function}() returns {not right} but should return {right}.",
        f"def test_{function}_is_a_flag():\n    assert isinstance({function}(), bool)\n",
        f"def test_{function}_value():\n    assert {function}() is {right}\n",
    )


def typo(word: str, rng: random.Random) -> str:
    """`word` with one letter dropped, doubled or swapped with the next (never the first)."""
    while True:
        i = rng.randrange(1, len(word) - 1)
        kind = rng.choice(("drop", "double", "swap"))
        if kind == "drop":
            wrong = word[:i] + word[i + 1 :]
        elif kind == "double":
            wrong = word[:i] + word[i] + word[i:]
        else:
            wrong = word[:i] + word[i + 1] + word[i] + word[i + 2 :]
        if wrong != word:
            return wrong


def label(name: str, split: str, rng: random.Random) -> Defect:
    """A string with a typo."""
    wrong = typo(name, rng)
    constant, function = f"{name.upper()}_LABEL", f"{name}_label"
    fixed = module(
        f"The {name} label.",
        f'''
        {constant} = "{name}"


        def {function}():
            """The label printed on the {name}."""
            return {constant}
        ''',
    )
    return Defect(
        "labels",
        name,
        split,
        fixed,
        f'{constant} = "{wrong}"',
        f'{constant} = "{name}"',
        f"{function}() returns {wrong!r} but should return {name!r}.",
        f"def test_{function}_initial():\n    assert {function}().startswith({name[0]!r})\n",
        f"def test_{function}_spelling():\n    assert {function}() == {name!r}\n",
    )


TEMPLATES = {"dials": dial, "labels": label, "switches": switch, "tallies": tally}


def defects(num_names: int, held_out_every: int) -> list[Defect]:
    """Every task of the family, repository by repository, names in order; seeded."""
    all_names = names(num_names)
    held_out = held_out_names(all_names, held_out_every)
    result = []
    for repo, template in TEMPLATES.items():
        rng = random.Random(f"{SEED}-{repo}")
        for name in all_names:
            result.append(template(name, "held_out" if name in held_out else "train", rng))
    return result
