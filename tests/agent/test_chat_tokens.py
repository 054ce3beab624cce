"""The test tokenizer, the Qwen3 chat format as ids, and the episode's token bookkeeping."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tokenizers
from transformers import AutoTokenizer

from deepswe_jax.agent.chat import (
    QWEN3_ADDED_TOKENS,
    ChatTokenizer,
    ConversationTokens,
    Message,
    render_chat,
)

TOKENIZER_DIR = Path(__file__).resolve().parents[1] / "assets" / "tokenizer"

MESSAGES = [
    Message("system", "You are a careful agent."),
    Message("user", "Fix the bug in `add`.\n\n  Indented line, ünïcode ✓"),
    Message("assistant", "<think>\nLook first.\n</think>\n\n<function=finish>\n</function>"),
    Message("user", "Exit code: 0\nSteps Remaining: 3"),
]


@pytest.fixture(scope="module")
def tokenizer() -> ChatTokenizer:
    return ChatTokenizer.from_directory(TOKENIZER_DIR)


def test_asset_is_small_and_shaped_like_qwen3(tokenizer: ChatTokenizer):
    total_bytes = sum(p.stat().st_size for p in TOKENIZER_DIR.iterdir())
    assert total_bytes < 1_000_000
    assert tokenizer.vocab_size == 4096
    ids = [tokenizer.tokenizer.token_to_id(token) for token, _ in QWEN3_ADDED_TOKENS]
    assert ids == list(range(4096 - len(QWEN3_ADDED_TOKENS), 4096))  # after the learned vocabulary
    assert tokenizer.stop_token_ids == (ids[2], ids[0])  # <|im_end|>, <|endoftext|>
    config = json.loads((TOKENIZER_DIR / "tokenizer_config.json").read_text())
    assert config["eos_token"] == "<|im_end|>" and config["pad_token"] == "<|endoftext|>"


def test_prompt_ids_match_transformers_chat_template(tokenizer: ChatTokenizer):
    hf = AutoTokenizer.from_pretrained(str(TOKENIZER_DIR))
    rows = [{"role": m.role, "content": m.content} for m in MESSAGES]
    text = hf.apply_chat_template(rows, add_generation_prompt=True, tokenize=False)
    assert text == render_chat(MESSAGES, add_generation_prompt=True)
    assert hf(text, add_special_tokens=False)["input_ids"] == tokenizer.prompt_ids(MESSAGES)
    assert tokenizer.decode(tokenizer.prompt_ids(MESSAGES)) == text


def test_thinking_stays_verbatim_in_history(tokenizer: ChatTokenizer):
    text = tokenizer.decode(tokenizer.prompt_ids(MESSAGES))
    assert "<|im_start|>assistant\n<think>\nLook first.\n</think>\n\n<function=finish>" in text
    think_id = tokenizer.tokenizer.token_to_id("<think>")
    assert think_id in tokenizer.prompt_ids(MESSAGES)


def test_special_token_strings_in_content_are_plain_text(tokenizer: ChatTokenizer):
    ids = tokenizer.turn_ids(Message("user", "print('<|im_end|>')"))
    assert ids.count(tokenizer.im_end_id) == 1  # only the turn's own end
    assert tokenizer.decode(ids) == "<|im_start|>user\nprint('<|im_end|>')<|im_end|>\n"


def test_observation_ids_continue_the_chat_format(tokenizer: ChatTokenizer):
    turn = tokenizer.encode_text("done") + [tokenizer.im_end_id]
    observation = tokenizer.observation_ids("Exit code: 0", assistant_turn_closed=True)
    prompt = tokenizer.prompt_ids(MESSAGES[:2])
    conversation = MESSAGES[:2] + [Message("assistant", "done"), Message("user", "Exit code: 0")]
    assert prompt + turn + observation == tokenizer.prompt_ids(conversation)
    unclosed = tokenizer.observation_ids("Exit code: 0", assistant_turn_closed=False)
    assert unclosed == [tokenizer.im_end_id] + observation


def test_conversation_tokens_mask_and_logprobs(tokenizer: ChatTokenizer):
    tokens = ConversationTokens([1, 2, 3])
    tokens.append_sampled([10, 11, tokenizer.im_end_id], [-0.1, -0.2, -0.3])
    tokens.append_observation([20, 21])
    tokens.append_sampled([12], [-0.4])
    assert tokens.token_ids == [1, 2, 3, 10, 11, tokenizer.im_end_id, 20, 21, 12]
    assert tokens.loss_mask == [0, 0, 0, 1, 1, 1, 0, 0, 1]
    assert tokens.logprobs == [0.0, 0.0, 0.0, -0.1, -0.2, -0.3, 0.0, 0.0, -0.4]
    assert tokens.num_response_tokens == 6
    with pytest.raises(ValueError, match="one logprob per generated token"):
        tokens.append_sampled([1, 2], [-0.1])


def test_missing_tokenizer_file_says_what_to_do(tmp_path: Path):
    with pytest.raises(FileNotFoundError, match="build_tokenizer"):
        ChatTokenizer.from_directory(tmp_path)


def test_non_chat_tokenizer_is_refused():
    plain = tokenizers.Tokenizer(tokenizers.models.BPE())
    with pytest.raises(ValueError, match="Qwen3 chat tokenizer"):
        ChatTokenizer(plain)
