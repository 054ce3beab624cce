"""The dependency rules of ARCHITECTURE.md (Packages), read from the source's import statements (ast), so a new
violation fails CI:

  - env/ imports no JAX (nor flax, optax, orbax), directly or through other modules;
  - no library module (all but the composition root, deepswe_jax.experiment, and the launch
    scripts' command line, deepswe_jax.cli) imports the root, launch/ or configs/, nor
    ml_collections (library packages take typed settings, never a config);
  - sampling/ does not reach agent/ (samplers know nothing of tool calls);
  - packages depend in one direction (PACKAGE_ORDER), so there are no cycles between them;
  - no import cycles between modules of deepswe_jax;
  - env/'s rooms (ENV_ROOMS) stay apart: docker/ and k8s/ import neither each other nor
    grading/; grading/ imports no k8s/, and of docker/ only the default of grade_patch; env's
    core reaches the rooms only where CORE_ROOM_IMPORTS lists (the pool composes them);
    tools/ (copied into containers) imports nothing of ours; outside env/ only the root, the
    command line and the listed evaluation step reach the runtimes (docker/, k8s/).

Every import counts wherever it is written: at module level, inside `if TYPE_CHECKING:` (a type
named in a signature is a dependency of the design, and a cycle through annotations is the
same tangle) and inside functions (deferring an import hides a cycle from Python, not from the
reader). Importing a.b.c also runs a/__init__ and a/b/__init__, so it depends on them too.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Collection, Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
ROOT_PACKAGE = "deepswe_jax.experiment"
# The launch scripts' command line (flags, the --config schema check, errors, Ctrl-C): above the
# library like the root, so it may read configs.
CLI_MODULE = "deepswe_jax.cli"
# Lower packages first: a package may import only packages before it in this list.
PACKAGE_ORDER = (
    "deepswe_jax.errors",
    "deepswe_jax.interrupts",
    "deepswe_jax.parallel",
    "deepswe_jax.model",
    "deepswe_jax.checkpoint",
    "deepswe_jax.env",
    "deepswe_jax.sampling",
    "deepswe_jax.agent",
    "deepswe_jax.rl",
    "deepswe_jax.verify",
    ROOT_PACKAGE,
    CLI_MODULE,
)
JAX_LIBRARIES = ("jax", "jaxlib", "flax", "optax", "orbax")
# env/'s sub-packages; the rest of env/ is its core (tasks, Runtime, Env, the pool).
ENV_DOCKER, ENV_K8S, ENV_GRADING = (
    "deepswe_jax.env.docker",
    "deepswe_jax.env.k8s",
    "deepswe_jax.env.grading",
)
ENV_ROOMS = (ENV_DOCKER, ENV_K8S, ENV_GRADING)
ENV_TOOLS = "deepswe_jax.env.tools"
# The only modules of the rooms that env's core imports, by importer.
CORE_ROOM_IMPORTS = {
    # the pool composes them: Docker placement and runtimes, grade_patch
    "deepswe_jax.env.pool": {
        f"{ENV_DOCKER}.docker_runtime",
        f"{ENV_DOCKER}.hosts",
        f"{ENV_DOCKER}.placement",
        f"{ENV_DOCKER}.settings",
        f"{ENV_GRADING}.grading",
    },
    "deepswe_jax.env.protocols": {f"{ENV_GRADING}.grading"},  # GradeResult in a signature
    "deepswe_jax.env.tasks": {f"{ENV_GRADING}.harness_swebench"},  # load_tasks: check_gradable
}
# The only modules of env/docker that grading imports: grade_patch(client=...)'s default, a
# container on that Docker engine.
GRADING_RUNTIME_IMPORTS = {f"{ENV_GRADING}.grading": {f"{ENV_DOCKER}.docker_runtime"}}
# Library modules outside env/ that may import a runtime room (the root and cli always may).
RUNTIME_IMPORTS_OUTSIDE_ENV = {
    # evaluation builds missing task images before its episodes
    "deepswe_jax.verify.evaluation.run": {f"{ENV_DOCKER}.images"},
}
# Cycles that exist on main, each with who breaks it; the test fails when one is gone, so the
# set only shrinks.
KNOWN_CYCLES: set[frozenset[str]] = set()


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted((REPO_ROOT / "deepswe_jax").rglob("*.py"))}


def imported_names(path: Path) -> Iterator[str]:
    """Every module name an import statement anywhere in `path` names: `import a.b` gives a.b;
    `from a.b import c` gives a.b.c when that is a module, else a.b."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: write absolute imports (from deepswe_jax...)"
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                yield candidate if candidate in MODULES else node.module


def ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def dependencies(module: str) -> set[str]:
    """The deepswe_jax modules `module` imports, with the packages whose __init__ that runs."""
    found = set()
    for name in imported_names(MODULES[module]):
        for target in (name, *ancestors(name)):
            if target in MODULES and target != module and not module.startswith(f"{target}."):
                found.add(target)
    return found


GRAPH = {module: dependencies(module) for module in MODULES}


def reachable(start: str) -> set[str]:
    """Modules `start` imports, directly or through others (itself excluded)."""
    seen, stack = set(), list(GRAPH[start])
    while stack:
        module = stack.pop()
        if module not in seen:
            seen.add(module)
            stack.extend(GRAPH[module])
    return seen - {start}


def external_imports(module: str) -> set[str]:
    """Top-level names of the non-deepswe_jax modules `module` imports."""
    return {name.split(".")[0] for name in imported_names(MODULES[module])} - {"deepswe_jax"}


def package_of(module: str) -> str:
    """The entry of PACKAGE_ORDER `module` belongs to ('deepswe_jax' for the root __init__)."""
    if module == "deepswe_jax":
        return module
    for package in PACKAGE_ORDER:
        if module == package or module.startswith(f"{package}."):
            return package
    raise AssertionError(f"{module} belongs to no package of PACKAGE_ORDER; add its package")


def strongly_connected_components(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm, iteratively: the cycles of `graph` as sets of nodes (size > 1)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components = []
    counter = itertools.count()
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = next(counter)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = next(counter)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(component)
    return components


LIBRARY = [m for m in MODULES if package_of(m) not in (ROOT_PACKAGE, CLI_MODULE, "deepswe_jax")]


def unused_allowances(allowed: dict[str, set[str]]) -> dict[str, list[str]]:
    """The imports an allowance table lists that are no longer made: remove them, so the tables
    only shrink."""
    unused = {module: sorted(names - GRAPH.get(module, set())) for module, names in allowed.items()}
    return {module: names for module, names in unused.items() if names}


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(f"{package}.")


def env_room(module: str) -> str | None:
    """The room (ENV_ROOMS, ENV_TOOLS) `module` is in; 'core' for env's other modules; None
    outside env."""
    for room in (*ENV_ROOMS, ENV_TOOLS):
        if within(module, room):
            return room
    return "core" if within(module, "deepswe_jax.env") else None


def imports_into(module: str, rooms: tuple[str, ...], allowed: Collection[str] = ()) -> set[str]:
    """What `module` imports of `rooms` beyond `allowed` (an allowed module's packages, whose
    __init__ the import runs, included)."""
    allowed_with_packages = {a for name in allowed for a in (name, *ancestors(name))}
    return {
        target
        for target in GRAPH[module]
        if any(within(target, room) for room in rooms) and target not in allowed_with_packages
    }


def test_the_graph_sees_every_kind_of_import():
    """The reader finds module-level, TYPE_CHECKING-only and function-local imports."""
    assert "deepswe_jax.env.protocols" in GRAPH["deepswe_jax.agent.rollout"]  # TYPE_CHECKING
    assert "deepswe_jax.sampling.jax_sampler" in GRAPH["deepswe_jax.experiment.training"]  # local
    assert "deepswe_jax.parallel" in GRAPH["deepswe_jax.model.qwen3"]  # the package's __init__
    assert set(MODULES) == set(GRAPH) and len(MODULES) > 60


def test_env_imports_no_jax():
    jax_importers = {m for m in MODULES if external_imports(m) & set(JAX_LIBRARIES)}
    env = [m for m in MODULES if package_of(m) == "deepswe_jax.env"]
    offenders = {  # env module -> the modules (itself or ones it imports) that import JAX
        module: sorted({module, *reachable(module)} & jax_importers)
        for module in env
        if {module, *reachable(module)} & jax_importers
    }
    assert not offenders, f"env/ must run without JAX ({JAX_LIBRARIES}): {offenders}"


def test_library_packages_import_neither_the_root_nor_configs():
    offenders = {}
    for module in LIBRARY:
        names = set(imported_names(MODULES[module]))
        bad = {
            name
            for name in names
            if name == ROOT_PACKAGE
            or name.startswith(f"{ROOT_PACKAGE}.")
            or name.split(".")[0] in ("launch", "configs", "ml_collections")
        }
        if bad:
            offenders[module] = sorted(bad)
    assert not offenders, (
        "library modules take typed settings and objects; only deepswe_jax/experiment reads "
        f"configs and builds them: {offenders}"
    )


def test_sampling_does_not_reach_the_agent():
    sampling = [m for m in MODULES if package_of(m) == "deepswe_jax.sampling"]
    offenders = {
        module: sorted(m for m in reachable(module) if package_of(m) == "deepswe_jax.agent")
        for module in sampling
    }
    assert not any(offenders.values()), f"sampling/ must know nothing of tool calls: {offenders}"


def test_env_runtimes_import_neither_each_other_nor_grading():
    others = {ENV_DOCKER: (ENV_K8S, ENV_GRADING), ENV_K8S: (ENV_DOCKER, ENV_GRADING)}
    offenders = {
        module: sorted(found)
        for module in MODULES
        if env_room(module) in others and (found := imports_into(module, others[env_room(module)]))
    }
    assert not offenders, (
        "env/docker and env/k8s are two runtimes side by side, each over env's core (Runtime, "
        f"ownership, tools); grading runs in either, so neither knows it: {offenders}"
    )


def test_grading_imports_no_runtime_but_its_default():
    offenders = {
        module: sorted(found)
        for module in MODULES
        if env_room(module) == ENV_GRADING
        and (
            found := imports_into(
                module, (ENV_DOCKER, ENV_K8S), GRADING_RUNTIME_IMPORTS.get(module, ())
            )
        )
    }
    assert not offenders, (
        "env/grading grades in the runtimes of any RuntimeFactory it is given; of env/docker "
        f"only grade_patch's default (GRADING_RUNTIME_IMPORTS) may be imported: {offenders}"
    )
    assert not unused_allowances(GRADING_RUNTIME_IMPORTS)


def test_env_core_reaches_the_rooms_only_where_listed():
    offenders = {
        module: sorted(found)
        for module in MODULES
        if env_room(module) == "core"
        and (found := imports_into(module, ENV_ROOMS, CORE_ROOM_IMPORTS.get(module, ())))
    }
    assert not offenders, (
        "env's core knows runtimes by the Runtime protocol; only the pool composes Docker and "
        f"grading (CORE_ROOM_IMPORTS lists every import into a room): {offenders}"
    )
    assert not unused_allowances(CORE_ROOM_IMPORTS)


def test_env_tools_import_nothing_of_ours():
    offenders = {
        module: sorted(
            name for name in imported_names(MODULES[module]) if within(name, "deepswe_jax")
        )
        for module in MODULES
        if env_room(module) == ENV_TOOLS
    }
    offenders = {module: found for module, found in offenders.items() if found}
    assert not offenders, (
        "env/tools/ is copied into containers and run by their python, without this package: "
        f"{offenders}"
    )


def test_outside_env_only_the_root_reaches_the_runtimes():
    offenders = {
        module: sorted(found)
        for module in LIBRARY
        if env_room(module) is None
        and (
            found := imports_into(
                module, (ENV_DOCKER, ENV_K8S), RUNTIME_IMPORTS_OUTSIDE_ENV.get(module, ())
            )
        )
    }
    assert not offenders, (
        "library packages outside env/ use environments through EnvPool and the Runtime "
        "protocol; the composition root (deepswe_jax.experiment) picks Docker or Kubernetes: "
        f"{offenders}"
    )
    assert not unused_allowances(RUNTIME_IMPORTS_OUTSIDE_ENV)


def test_packages_depend_in_one_direction():
    rank = {package: i for i, package in enumerate(PACKAGE_ORDER)}
    upward = sorted(
        (module, target)
        for module in MODULES
        for target in GRAPH[module]
        if package_of(module) != "deepswe_jax"
        and package_of(target) != "deepswe_jax"
        and rank[package_of(target)] > rank[package_of(module)]
    )
    assert not upward, f"imports against PACKAGE_ORDER (lower packages first): {upward}"


def test_no_import_cycles_between_modules():
    cycles = {frozenset(c) for c in strongly_connected_components(GRAPH)}
    assert cycles <= KNOWN_CYCLES, f"import cycles: {sorted(map(sorted, cycles - KNOWN_CYCLES))}"
    assert KNOWN_CYCLES <= cycles, (
        f"{sorted(map(sorted, KNOWN_CYCLES - cycles))} no longer form a cycle: remove them "
        "from KNOWN_CYCLES"
    )


@pytest.mark.parametrize(
    "graph, cycles",
    [
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [{"a", "b", "c"}]),
        ({"a": {"b"}, "b": set(), "c": {"a", "b"}}, []),
        ({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c"}}, [{"a", "b"}, {"c", "d"}]),
    ],
)
def test_cycle_finder(graph, cycles):
    found = strongly_connected_components(graph)
    assert sorted(map(sorted, found)) == sorted(map(sorted, cycles))
