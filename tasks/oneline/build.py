"""Build the one-line task family, tasks/oneline/: hundreds of templated tasks a tiny model can learn.

Four repositories, one per template, each with one module per name of `NAMES`; every module
holds one defect at once (as in the shipped suite, the base tests all pass), so a repository is
one image and one base commit for all of its tasks. A task's issue names the file, the wrong
line and the right one, so the fix is a copy: one `file_editor str_replace` with old and new
strings taken from the issue, then `finish`.

    dials    a constant has the wrong value      `HARBOR_STEP = 37`        -> `HARBOR_STEP = 73`
    tallies  an arithmetic operator is wrong     `return left - right`     -> `return left + right`
    gauges   a comparison is off by its equality `return level > 42`       -> `return level >= 42`
    labels   a string literal has a typo         `HARBOR_LABEL = "harbr"`  -> `HARBOR_LABEL = "harbor"`

Train / held-out split by template instance: the names of `HELD_OUT_NAMES` and a held-out share
of the numbers (constants, thresholds) appear only in held_out.jsonl, so a held-out issue
holds no name and no number that any training issue holds.

The build writes repos/<repo>/ (the package and tests/test_<repo>.py), train.jsonl,
held_out.jsonl and train_small.jsonl (the main job's 2 tasks, from train) (rows like tasks/tasks.jsonl: SWE-bench fields plus image and source), and
verifies with pytest: every base test passes at base; every added test fails at base and
passes with the gold patch; the issue's old line occurs once in its file and replacing it by
the issue's new line gives the gold patch. Images: launch/build_images.py; in Docker, gold
resolves and the empty patch does not: launch/validate_tasks.py --tasks=tasks/oneline/train.jsonl.

    python tasks/oneline/build.py            # rebuild (seconds)
    python tasks/oneline/build.py --check    # fail if repos/ or the jsonl files are stale

A larger family for held-out evaluation (not shipped; BENCHMARKS.md, "Learning"): 300 training
names instead of 48, so that SFT learns to copy names rather than memorize them. Its images get
their own tag (deepswe/<repo>:n400-h4), and held_out_sample.jsonl is 64 of its 400 held-out tasks:

    python tasks/oneline/build.py --out_dir=/tmp/oneline400 --num_names=400 --held_out_sample=64
"""

from __future__ import annotations

import argparse
import builtins
import json
import keyword
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

FAMILY_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(FAMILY_DIR.parents[1]))

from deepswe_jax.agent.scripted_policy import FileEdit, minimal_edit  # noqa: E402
from deepswe_jax.env.images import commit_tree  # noqa: E402
from deepswe_jax.env.tasks import unified_diff  # noqa: E402

SPLITS = ("train", "held_out")
# train_small.jsonl: the main job's training tasks (configs/learn_tiny.py), few enough that SFT
# reaches partial competence and GRPO++ lifts it within minutes on 2 CPU cores (BENCHMARKS.md,
# "Learning": 8 tasks at 4 per iteration did not rise; these 2 at 16 rollouts each did).
SMALL_TASKS = ("dials-biropa", "switches-bulela")
OUTPUTS = (*SPLITS, "train_small")
NUM_NAMES = 64
HELD_OUT_EVERY = 4
SEED = 15
VERSION = "0.1"
CREATED_AT = "2025-01-01T00:00:00Z"

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


class FamilyError(Exception):
    """The generated family breaks one of its rules."""


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


def test_file(repo: str, tests: list[str], imports: list[tuple[str, str]]) -> str:
    lines = [f"from {repo}.{module_name} import {function}\n" for module_name, function in imports]
    return "".join(lines) + "\n\n" + "\n\n".join(tests)


def function_of(defect: Defect) -> str:
    return re.search(r"def (\w+)\(", defect.fixed_module).group(1)


def write_repo(root: Path, repo: str, repo_defects: list[Defect]) -> None:
    """The repository at its base state: every module with its defect, the base tests."""
    package = root / repo
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(f'"""{repo}: one small module per name."""\n')
    for defect in repo_defects:
        (root / defect.module_path).write_text(defect.shipped_module)
    (root / "tests").mkdir()
    imports = [(d.name, function_of(d)) for d in repo_defects]
    (root / "tests" / f"test_{repo}.py").write_text(
        test_file(repo, [d.base_test for d in repo_defects], imports)
    )
    (root / "README.md").write_text(
        f"{repo}: generated by tasks/oneline/build.py; each module has one defect.\n"
    )
    (root / "pyproject.toml").write_text(f'[project]\nname = "{repo}"\nversion = "{VERSION}"\n')


def test_path(repo: str) -> str:
    return f"tests/test_{repo}.py"


def test_node(repo: str, test: str) -> str:
    name = re.search(r"def (test_\w+)", test).group(1)
    return f"{test_path(repo)}::{name}"


def image_tag(num_names: int, held_out_every: int) -> str:
    """`base` for the shipped family; a family of other sizes gets its own tag, so that building
    its images does not replace (and later rebuild) the shipped family's."""
    if (num_names, held_out_every) == (NUM_NAMES, HELD_OUT_EVERY):
        return "base"
    return f"n{num_names}-h{held_out_every}"


def held_out_sample(held_out: list[dict], count: int) -> list[dict]:
    """`count` held-out tasks, the same number from each repository, evenly spaced in its
    names: a smaller evaluation set that keeps the repositories' mix."""
    repos = sorted({r["repo"] for r in held_out})
    per_repo, left_over = divmod(count, len(repos))
    if per_repo < 1 or left_over:
        raise FamilyError(
            f"--held_out_sample={count}: give a positive multiple of the {len(repos)} repositories"
        )
    sample = []
    for repo in repos:
        rows = [r for r in held_out if r["repo"] == repo]
        if per_repo > len(rows):
            raise FamilyError(f"--held_out_sample={count}: {repo} has only {len(rows)} tasks")
        sample += [rows[i * len(rows) // per_repo] for i in range(per_repo)]
    return sample


def row(defect: Defect, base_commit: str, base_tests_file: str, tag: str = "base") -> dict:
    path = test_path(defect.repo)
    return {
        "instance_id": f"{defect.repo}-{defect.name}",
        "repo": f"deepswe/{defect.repo}",
        "base_commit": base_commit,
        "problem_statement": defect.problem_statement,
        "hints_text": "",
        "created_at": CREATED_AT,
        "version": VERSION,
        "patch": unified_diff(defect.module_path, defect.shipped_module, defect.fixed_module),
        "test_patch": unified_diff(
            path, base_tests_file, base_tests_file.rstrip("\n") + "\n\n\n" + defect.new_test
        ),
        "FAIL_TO_PASS": [test_node(defect.repo, defect.new_test)],
        "PASS_TO_PASS": [test_node(defect.repo, defect.base_test)],
        "image": f"deepswe/{defect.repo}:{tag}",
        "source": f"repos/{defect.repo}",
    }


RESULT_LINE = re.compile(r"^(PASSED|FAILED|ERROR) (\S+)", re.MULTILINE)


def run_pytest(repo_dir: Path, python: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    env.pop("PYTHONPATH", None)
    result = subprocess.run(
        [python, "-m", "pytest", "-rA", "-q", "--tb=no", "-p", "no:cacheprovider"],
        cwd=repo_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return {node: status for status, node in RESULT_LINE.findall(result.stdout)}


def verify(repo: str, repo_defects: list[Defect], source: Path, python: str) -> None:
    """Base tests pass at base; the new tests fail at base and pass with every gold fix; the
    issue's old text is unique in its module and the issue's replacement is the gold fix."""
    with tempfile.TemporaryDirectory(prefix=f"oneline-{repo}-") as scratch:
        tree = Path(scratch) / repo
        shutil.copytree(source, tree)
        tests_file = tree / test_path(repo)
        tests_file.write_text(
            tests_file.read_text().rstrip("\n")
            + "".join("\n\n\n" + d.new_test.rstrip("\n") for d in repo_defects)
            + "\n"
        )
        before = run_pytest(tree, python)
        for defect in repo_defects:
            module_file = tree / defect.module_path
            text, edit = module_file.read_text(), defect.replacement
            if text.count(edit.old) != 1:
                raise FamilyError(f"{defect.module_path}: {edit.old!r} is not unique in the module")
            module_file.write_text(text.replace(edit.old, edit.new))
            if module_file.read_text() != defect.fixed_module:
                raise FamilyError(f"{defect.module_path}: the issue's replacement is not the fix")
        after = run_pytest(tree, python)
    for defect in repo_defects:
        base, new = test_node(repo, defect.base_test), test_node(repo, defect.new_test)
        if before.get(base) != "PASSED" or after.get(base) != "PASSED":
            raise FamilyError(f"{base}: must pass at base and fixed, got {before.get(base)}")
        if before.get(new) != "FAILED" or after.get(new) != "PASSED":
            raise FamilyError(
                f"{new}: must fail at base and pass fixed, got {before.get(new)}, {after.get(new)}"
            )


def check_split(all_defects: list[Defect]) -> None:
    """No held-out issue holds a name or a dial number that a training issue holds."""

    def names_and_numbers(split: str) -> tuple[set[str], set[str]]:
        chosen = [d for d in all_defects if d.split == split]
        numbers = {n for d in chosen if d.repo == "dials" for n in re.findall(r"\d+", d.wrong_line)}
        numbers |= {
            n for d in chosen if d.repo == "dials" for n in re.findall(r"\d+", d.right_line)
        }
        return {d.name for d in chosen}, numbers

    train_names, train_numbers = names_and_numbers("train")
    held_out_names, held_out_numbers = names_and_numbers("held_out")
    train_text = " ".join(d.problem_statement for d in all_defects if d.split == "train")
    leaked = {name for name in held_out_names if re.search(rf"\b{name}\b", train_text)}
    if leaked or train_numbers & held_out_numbers:
        raise FamilyError(
            f"held-out names {sorted(leaked)} or numbers {sorted(train_numbers & held_out_numbers)} "
            "appear in training issues"
        )


def build(out_dir: Path, python: str, num_names: int, held_out_every: int) -> dict[str, list[dict]]:
    """Writes the repositories under out_dir/repos, verifies them; returns the rows per split."""
    all_defects = defects(num_names, held_out_every)
    check_split(all_defects)
    rows: dict[str, list[dict]] = {"train": [], "held_out": []}
    tag = image_tag(num_names, held_out_every)
    for repo in TEMPLATES:
        repo_defects = [d for d in all_defects if d.repo == repo]
        source = out_dir / "repos" / repo
        write_repo(source, repo, repo_defects)
        verify(repo, repo_defects, source, python)
        with tempfile.TemporaryDirectory(prefix="oneline-commit-") as scratch:
            base_commit = commit_tree(source, Path(scratch) / "tree")
        base_tests = (source / test_path(repo)).read_text()
        for defect in repo_defects:
            rows[defect.split].append(row(defect, base_commit, base_tests, tag))
        print(f"  {repo}: {len(repo_defects)} tasks verified", flush=True)
    rows["train_small"] = [r for r in rows["train"] if r["instance_id"] in SMALL_TASKS]
    return rows


def jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def tree_files(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): p.read_text()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--python", default=sys.executable, help="interpreter that runs pytest")
    parser.add_argument("--check", action="store_true", help="fail if the family is out of date")
    parser.add_argument("--out_dir", default=str(FAMILY_DIR), help="where repos/ and jsonl go")
    parser.add_argument("--num_names", type=int, default=NUM_NAMES, help="modules per repository")
    parser.add_argument(
        "--held_out_every", type=int, default=HELD_OUT_EVERY, help="1 in k held out"
    )
    parser.add_argument(
        "--held_out_sample",
        type=int,
        default=0,
        help="also write held_out_sample.jsonl: this many held-out tasks, equal per repository",
    )
    args = parser.parse_args()
    out_dir = Path(args.out_dir)
    with tempfile.TemporaryDirectory(prefix="oneline-build-") as scratch:
        built = Path(scratch)
        try:
            rows = build(built, args.python, args.num_names, args.held_out_every)
            if args.held_out_sample:
                rows["held_out_sample"] = held_out_sample(rows["held_out"], args.held_out_sample)
        except FamilyError as error:
            sys.exit(f"tasks/oneline/build.py: {error}")
        if args.check:
            stale = [
                name
                for name in OUTPUTS
                if not (out_dir / f"{name}.jsonl").exists()
                or (out_dir / f"{name}.jsonl").read_text() != jsonl(rows[name])
            ]
            repos = out_dir / "repos"
            if not repos.is_dir() or tree_files(repos) != tree_files(built / "repos"):
                stale.append("repos")
            if stale:
                sys.exit(f"{out_dir}: {', '.join(stale)} out of date; run tasks/oneline/build.py")
            print(f"{out_dir} is up to date")
            return
        shutil.rmtree(out_dir / "repos", ignore_errors=True)
        shutil.copytree(built / "repos", out_dir / "repos")
    for name in rows:
        (out_dir / f"{name}.jsonl").write_text(jsonl(rows[name]))
        print(f"wrote {len(rows[name])} tasks to {out_dir / name}.jsonl")


if __name__ == "__main__":
    main()
