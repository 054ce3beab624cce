"""The --config flag of the launch scripts: an override of a field the config does not declare
is refused with its name before any work starts.

    app.run(main, flags_parser=parse_flags)

ml_collections' config_flags already loads `--config=configs/x.py`, locks the config and
parses each `--config.a.b=v` with the field's type (`--config.rl.lr=abc` fails with "flag
--config.rl.lr=abc: could not convert string to float"); an override naming no field, though,
ends in a traceback about a KeyError. `parse_flags` checks every override's field first and
refuses an unknown one the way absl refuses any bad flag, naming the closest field.
"""

from __future__ import annotations

import difflib
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path

import ml_collections
from absl import app

CONFIG_FLAG = "config"


def _flag_arguments(argv: Sequence[str], name: str) -> tuple[str | None, list[str]]:
    """(the value of --name, the dotted fields of the --name.<field> overrides) in `argv`."""
    path, fields = None, []
    for index, argument in enumerate(argv):
        if argument == "--":
            break
        option = argument.lstrip("-")
        if not argument.startswith("-"):
            continue
        key, has_value, value = option.partition("=")
        if key == name:
            path = value if has_value else (argv[index + 1] if index + 1 < len(argv) else None)
        elif key.startswith(f"{name}.") or key.startswith(f"no{name}."):
            fields.append(key.removeprefix("no").removeprefix(f"{name}."))
    return path, fields


def _load_config(argument: str) -> ml_collections.ConfigDict | None:
    """get_config() of `path[:arg]` as config_flags calls it; None when it cannot be loaded
    (config_flags then reports the problem itself)."""
    path, *config_string = argument.split(":", 1)
    if not Path(path).is_file():
        return None
    spec = importlib.util.spec_from_file_location("deepswe_config_check", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        config = module.get_config(*config_string)
    except Exception:  # config_flags reports load errors with their traceback
        return None
    return config if isinstance(config, ml_collections.ConfigDict) else None


def unknown_field(config: ml_collections.ConfigDict, field: str) -> str | None:
    """Why `field` (dotted) names no field of `config`, or None when it does."""
    node = config
    parts = field.split(".")
    for depth, part in enumerate(parts):
        if not isinstance(node, ml_collections.ConfigDict) or part not in node:
            known = sorted(node.keys()) if isinstance(node, ml_collections.ConfigDict) else []
            section = ".".join(parts[:depth])
            close = difflib.get_close_matches(part, known, n=1)
            hint = f" (did you mean {'.'.join([*parts[:depth], close[0]])}?)" if close else ""
            where = f"section {section}" if section else "the config"
            return (
                f"--{CONFIG_FLAG}.{field}: {where} has no field {part!r}{hint}; "
                "configs/common.py declares every field with its meaning"
            )
        node = node[part]
    return None


def parse_flags(argv: list[str]) -> list[str]:
    """absl's flag parsing (`app.run(main, flags_parser=parse_flags)`), after refusing a
    `--config.<field>` override of a field the config does not declare."""
    path, fields = _flag_arguments(argv[1:], CONFIG_FLAG)
    config = _load_config(path) if path else None
    if config is not None:
        for field in fields:
            error = unknown_field(config, field)
            if error is not None:
                sys.stderr.write(
                    f"FATAL Flags parsing error: {error}\n"
                    "Pass --helpshort or --helpfull to see help on flags.\n"
                )
                sys.exit(1)
    return app.parse_flags_with_usage(argv)
