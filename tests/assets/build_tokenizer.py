"""Builds tests/assets/tokenizer: a 4,096-id byte-level BPE tokenizer shaped like Qwen3's.

    python -m tests.assets.build_tokenizer [--out tests/assets/tokenizer]   # from the repo root

Same pre-tokenizer regex, normalizer (NFC) and byte-level decoder as Qwen3, the
26 Qwen3 added tokens (<|endoftext|>, <|im_start|>, <|im_end|>, ..., <think>,
</think>) after the learned vocabulary, and a Qwen3-like chat template that
keeps thinking verbatim (deepswe_jax.agent.chat.CHAT_TEMPLATE). Trained on the
agent's prompts plus a fixed list of Python standard-library sources; the
output is a pure function of that corpus (recorded in build_info.json with
its sha256), so the same Python minor version rebuilds identical files.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sysconfig
from pathlib import Path

import tokenizers
from tokenizers import AddedToken, decoders, models, normalizers, pre_tokenizers, trainers

from deepswe_jax.agent import parsing, prompts
from deepswe_jax.agent.chat import CHAT_TEMPLATE, END_OF_TEXT, IM_END, QWEN3_ADDED_TOKENS

VOCAB_SIZE = 4096
# Qwen2/Qwen3 pre-tokenizer split pattern.
QWEN_SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
STDLIB_FILES = (
    "argparse.py",
    "ast.py",
    "dataclasses.py",
    "difflib.py",
    "enum.py",
    "fnmatch.py",
    "functools.py",
    "glob.py",
    "inspect.py",
    "json/__init__.py",
    "json/decoder.py",
    "json/encoder.py",
    "logging/__init__.py",
    "pathlib.py",
    "pprint.py",
    "shlex.py",
    "shutil.py",
    "string.py",
    "subprocess.py",
    "tempfile.py",
    "textwrap.py",
    "typing.py",
    "unittest/case.py",
    "unittest/mock.py",
    "datetime.py",
    "fractions.py",
    "statistics.py",
    "csv.py",
    "configparser.py",
    "calendar.py",
)
# The prompts are repeated so that their words become single tokens and prompts stay short.
PROMPT_REPEATS = 20


def prompt_corpus() -> list[str]:
    """The texts the agent sends and the model writes: prompts, notices, error messages, a call."""
    texts = [
        prompts.system_prompt(),
        prompts.instance_prompt("Calling `parse('2024-01-01')` raises ValueError."),
        prompts.render_observation(
            "Exit code: 0\nExecution output of [execute_bash]:\nok",
            steps_remaining=3,
            submit_now=True,
        ),
        parsing.NO_CALL_ERROR.format(example=parsing.CALL_EXAMPLE),
        "<think>\nLet me look at the file first.\n</think>\n\n" + parsing.CALL_EXAMPLE,
    ]
    return texts * PROMPT_REPEATS


def stdlib_corpus() -> list[str]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    return [(stdlib / name).read_text(encoding="utf-8") for name in STDLIB_FILES]


def build_tokenizer(corpus: list[str]) -> tokenizers.Tokenizer:
    """Trains the BPE model on `corpus` and appends the Qwen3 added tokens in Qwen3's order."""
    tokenizer = tokenizers.Tokenizer(models.BPE(unk_token=None, byte_fallback=False))
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(tokenizers.Regex(QWEN_SPLIT_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE - len(QWEN3_ADDED_TOKENS),
        min_frequency=2,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus, trainer=trainer)
    for token, special in QWEN3_ADDED_TOKENS:
        added = AddedToken(token, special=special, normalized=False)
        if special:
            tokenizer.add_special_tokens([added])
        else:
            tokenizer.add_tokens([added])
    return tokenizer


def write_tokenizer_config(directory: str | os.PathLike, tokenizer: tokenizers.Tokenizer) -> None:
    """Writes a Qwen3-like tokenizer_config.json (chat template, eos/pad, added tokens) for
    `transformers.AutoTokenizer`."""
    added = {
        str(tokenizer.token_to_id(token)): {
            "content": token,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": special,
        }
        for token, special in QWEN3_ADDED_TOKENS
    }
    config = {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": added,
        "bos_token": None,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": IM_END,
        "errors": "replace",
        "model_max_length": 131072,
        "pad_token": END_OF_TEXT,
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }
    path = Path(directory) / "tokenizer_config.json"
    path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(__file__).parent / "tokenizer"))
    out = Path(parser.parse_args().out)
    corpus = prompt_corpus() + stdlib_corpus()
    tokenizer = build_tokenizer(corpus)
    if tokenizer.get_vocab_size(with_added_tokens=True) != VOCAB_SIZE:
        raise RuntimeError(
            f"trained vocabulary has {tokenizer.get_vocab_size(with_added_tokens=True)} ids, "
            f"expected {VOCAB_SIZE}; the corpus is too small, add files to STDLIB_FILES"
        )
    out.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(out / "tokenizer.json"), pretty=False)
    write_tokenizer_config(out, tokenizer)
    info = {
        "vocab_size": VOCAB_SIZE,
        "python": platform.python_version(),
        "tokenizers": tokenizers.__version__,
        "stdlib_files": list(STDLIB_FILES),
        "prompt_repeats": PROMPT_REPEATS,
        "corpus_sha256": hashlib.sha256("\0".join(corpus).encode()).hexdigest(),
    }
    (out / "build_info.json").write_text(json.dumps(info, indent=2) + "\n")
    print(f"wrote {out} ({VOCAB_SIZE} ids)")


if __name__ == "__main__":
    main()
