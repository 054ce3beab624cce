"""Qwen3 chat format as token ids, built incrementally so trained tokens are the sampled tokens.

A conversation is a sequence of turns `<|im_start|>{role}\\n{content}<|im_end|>\\n`; the
model writes after `<|im_start|>assistant\\n` and ends its turn with `<|im_end|>`.
Unlike Qwen3's own template, earlier assistant turns keep their `<think>...</think>`
blocks verbatim (as rLLM/DeepSWE do), so each turn's prompt is an exact prefix of the next.

Token bookkeeping for one episode (`ConversationTokens`):

    prompt   = system turn + user turn + `<|im_start|>assistant\\n`       (mask 0)
    turn k   = exactly the ids the sampler returned, ending with the
               sampled stop token `<|im_end|>`                            (mask 1)
    obs k    = `\\n<|im_start|>user\\n{observation}<|im_end|>\\n<|im_start|>assistant\\n` (mask 0)

When a turn stopped without `<|im_end|>` (e.g. on `<|endoftext|>`), the observation
segment starts with an `<|im_end|>` added with mask 0. Earlier text is never
re-tokenized. Text given to the tokenizer is always plain text: a special-token
string inside an issue or a tool output (say "<|im_end|>") is encoded as
ordinary characters, never as the control token.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import tokenizers

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
END_OF_TEXT = "<|endoftext|>"

# Qwen3's added tokens in id order; `True` marks the ones the tokenizer treats as special.
QWEN3_ADDED_TOKENS: tuple[tuple[str, bool], ...] = (
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
    ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True),
    ("<|box_start|>", True),
    ("<|box_end|>", True),
    ("<|quad_start|>", True),
    ("<|quad_end|>", True),
    ("<|vision_start|>", True),
    ("<|vision_end|>", True),
    ("<|vision_pad|>", True),
    ("<|image_pad|>", True),
    ("<|video_pad|>", True),
    ("<tool_call>", False),
    ("</tool_call>", False),
    ("<|fim_prefix|>", False),
    ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False),
    ("<|repo_name|>", False),
    ("<|file_sep|>", False),
    ("<tool_response>", False),
    ("</tool_response>", False),
    ("<think>", False),
    ("</think>", False),
)

# Jinja chat template for tokenizer_config.json: the same turns `render_chat` writes.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)


@dataclass(frozen=True)
class Message:
    """One chat turn: role is 'system', 'user' or 'assistant'."""

    role: str
    content: str


def render_chat(messages: Sequence[Message], *, add_generation_prompt: bool) -> str:
    """The conversation as text, exactly as `CHAT_TEMPLATE` renders it."""
    text = "".join(f"{IM_START}{m.role}\n{m.content}{IM_END}\n" for m in messages)
    return text + (f"{IM_START}assistant\n" if add_generation_prompt else "")


class ChatTokenizer:
    """A Qwen3-style byte-level BPE tokenizer plus the ids of the chat format's pieces.

    Owns `tokenizer` and switches it to encode special-token strings as plain text.
    """

    def __init__(self, tokenizer: tokenizers.Tokenizer):
        tokenizer.encode_special_tokens = True
        self.tokenizer = tokenizer
        self.im_start_id = self._token_id(IM_START)
        self.im_end_id = self._token_id(IM_END)
        self.end_of_text_id = self._token_id(END_OF_TEXT)
        self._newline_ids = tuple(self.encode_text("\n"))
        self._generation_prompt_ids = (self.im_start_id, *self.encode_text("assistant\n"))

    @classmethod
    def from_directory(cls, path: str | os.PathLike) -> ChatTokenizer:
        """Loads `tokenizer.json` from a local HF tokenizer directory (e.g. a Qwen3 checkpoint)."""
        tokenizer_file = Path(path) / "tokenizer.json"
        if not tokenizer_file.is_file():
            raise FileNotFoundError(
                f"no tokenizer.json in {path}; point config.tokenizer at a HF tokenizer directory "
                "(a Qwen3 checkpoint, or tests/assets/tokenizer built by "
                "`python -m tests.assets.build_tokenizer`)"
            )
        return cls(tokenizers.Tokenizer.from_file(str(tokenizer_file)))

    def _token_id(self, token: str) -> int:
        token_id = self.tokenizer.token_to_id(token)
        if token_id is None:
            raise ValueError(
                f"the tokenizer has no {token} token; a Qwen3 chat tokenizer is needed"
            )
        return token_id

    @property
    def vocab_size(self) -> int:
        """Number of ids, added tokens included."""
        return self.tokenizer.get_vocab_size(with_added_tokens=True)

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        """Tokens that end an assistant turn: `<|im_end|>`, then `<|endoftext|>`."""
        return (self.im_end_id, self.end_of_text_id)

    @property
    def generation_prompt_ids(self) -> tuple[int, ...]:
        """`<|im_start|>assistant\\n`: where the model starts writing."""
        return self._generation_prompt_ids

    def encode_text(self, text: str) -> list[int]:
        """Ids of `text` as plain text (special-token strings in it are not control tokens)."""
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, token_ids: Sequence[int]) -> str:
        """Text of `token_ids`, special tokens written out."""
        return self.tokenizer.decode(list(token_ids), skip_special_tokens=False)

    def turn_ids(self, message: Message) -> list[int]:
        """`<|im_start|>{role}\\n{content}<|im_end|>\\n` as ids."""
        return [
            self.im_start_id,
            *self.encode_text(f"{message.role}\n{message.content}"),
            self.im_end_id,
            *self._newline_ids,
        ]

    def prompt_ids(self, messages: Sequence[Message]) -> list[int]:
        """The turns of `messages` followed by the generation prompt."""
        ids: list[int] = []
        for message in messages:
            ids.extend(self.turn_ids(message))
        return ids + list(self._generation_prompt_ids)

    def observation_ids(self, observation: str, *, assistant_turn_closed: bool) -> list[int]:
        """What follows a sampled assistant turn: the user turn holding `observation` and the
        next generation prompt; starts with `<|im_end|>` when the sampler did not close the turn."""
        closing = [] if assistant_turn_closed else [self.im_end_id]
        return (
            closing
            + list(self._newline_ids)
            + self.turn_ids(Message("user", observation))
            + list(self._generation_prompt_ids)
        )


class ConversationTokens:
    """The growing token sequence of one episode, with its loss mask and sampler logprobs.

    All three lists have the same length [num_tokens]; the mask is 1 exactly on
    tokens the sampler produced and logprobs are 0.0 wherever the mask is 0.
    """

    def __init__(self, prompt_ids: Sequence[int]):
        self.prompt_ids = tuple(prompt_ids)
        self.token_ids: list[int] = list(prompt_ids)
        self.loss_mask: list[int] = [0] * len(prompt_ids)
        self.logprobs: list[float] = [0.0] * len(prompt_ids)

    @property
    def num_response_tokens(self) -> int:
        """Tokens after the prompt (assistant and observation), the ones the context budget counts."""
        return len(self.token_ids) - len(self.prompt_ids)

    def append_sampled(self, token_ids: Sequence[int], logprobs: Sequence[float]) -> None:
        """Appends a completion exactly as sampled (mask 1)."""
        if len(token_ids) != len(logprobs):
            raise ValueError(
                f"a completion has {len(token_ids)} tokens but {len(logprobs)} logprobs; "
                "the sampler must return one logprob per generated token"
            )
        self.token_ids.extend(token_ids)
        self.loss_mask.extend([1] * len(token_ids))
        self.logprobs.extend(float(x) for x in logprobs)

    def append_observation(self, token_ids: Sequence[int]) -> None:
        """Appends tokens the environment wrote (mask 0)."""
        self.token_ids.extend(token_ids)
        self.loss_mask.extend([0] * len(token_ids))
        self.logprobs.extend([0.0] * len(token_ids))
