"""Agent-shaped rollouts: JaxSampler (dense or paged cache, prefix reuse on or off) against vLLM.

  JAX_PLATFORMS=cpu python -m bench.agent_rollouts [--models tiny 100M] [--tasks 4 --rollouts 8]
      [--samplers jax jax_paged jax_no_reuse jax_stacked vllm] [--pool 0.25]

A synthetic workload shaped like DeepSWE's, scaled to 2 cores: `tasks` x `rollouts` episodes run
concurrently (asyncio, as the agent loop runs them); a task's rollouts share its prompt of
`prompt_len` tokens; each episode takes `turns` turns (drawn per episode), each a greedy reply of
exactly r tokens (no stop tokens; r drawn in `reply`), then an observation of o tokens (drawn in
`observation`) appended to the conversation, whose whole token sequence is the next turn's
prompt (token-exact, as `agent/rollout.py` sends it). Draws are seeded per episode, so every
sampler sees the same workload, and with the same weights greedy replies should agree.

Reported per sampler: wall seconds (compilation excluded: another draw of the same workload
runs first on each sampler, unless --short_warmup), episodes/s, generated tokens/s, prompt tokens computed (prefill) against the
workload's unique prompt tokens (the positions no earlier request computed, in prefill or decode;
at least one per request, whose logits start the reply), the KV cache the sampler allocates and
the most of it its rows held at once (paged: pages held; the others hold what they allocate),
requests preempted for want of pages, and 'same tokens': the fraction of replies equal to the
first sampler's. `jax_paged` runs on a pool of `pool` x the dense cache's tokens; `jax_stacked`
holds the decoder layers' weights stacked, as on GPUs, instead of one array per layer (the CPU
default, sampling/weights.py).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import time

import jax
import numpy as np
from flax import nnx

from bench.vllm_sampler import MODELS
from configs import tiny
from deepswe_jax.model import Qwen3Config, Qwen3ForCausalLM
from deepswe_jax.sampling import GenerateRequest, JaxSampler, SamplingParams
from deepswe_jax.sampling.memory import memory_per_device


@dataclasses.dataclass(frozen=True)
class Workload:
    tasks: int
    rollouts: int
    prompt_len: int
    turns: tuple[int, int]
    reply: tuple[int, int]
    observation: tuple[int, int]

    @property
    def max_context(self) -> int:
        return self.prompt_len + self.turns[1] * (self.reply[1] + self.observation[1])


async def episode(sampler, workload: Workload, task: int, rollout: int, vocab: int, log: list):
    """One scripted episode; appends ((task, rollout, turn), prompt, reply) to `log` per turn."""
    rng = np.random.default_rng([task, rollout])
    task_rng = np.random.default_rng(task)
    prompt = tuple(int(t) for t in task_rng.integers(0, vocab, workload.prompt_len))
    for turn in range(int(rng.integers(workload.turns[0], workload.turns[1] + 1))):
        params = SamplingParams(
            temperature=0.0, max_new_tokens=int(rng.integers(*workload.reply, endpoint=True))
        )
        [completion] = await sampler.generate([GenerateRequest(prompt, params)])
        log.append(((task, rollout, turn), prompt, completion.token_ids))
        length = int(rng.integers(*workload.observation, endpoint=True))
        observation = rng.integers(0, vocab, length)
        prompt = prompt + completion.token_ids + tuple(int(t) for t in observation)


async def run_all(sampler, workload: Workload, vocab: int, first_task: int = 0) -> list:
    log: list = []
    await asyncio.gather(
        *(
            episode(sampler, workload, task, rollout, vocab, log)
            for task in range(first_task, first_task + workload.tasks)
            for rollout in range(workload.rollouts)
        )
    )
    return log


def unique_prompt_tokens(log: list) -> int:
    """Prompt positions no earlier request held (prompt, or reply tokens fed back in decode), at
    least one per request: the least any prefix cache must compute. Requests in log order."""
    seen: set[int] = set()
    total = 0
    for _, prompt, reply in log:
        new, chain = 0, 0
        for position, token in enumerate(prompt + reply[:-1]):
            chain = hash((chain, token))
            if chain not in seen:
                seen.add(chain)
                new += position < len(prompt)
        total += max(new, 1)
    return total


def run_model(
    name: str, workload: Workload, samplers: list[str], full_warmup: bool, pool: float
) -> None:
    max_len = workload.max_context + 8
    config = dataclasses.replace(
        Qwen3Config.from_hf_dict(tiny.get_config().model.to_dict()),
        **MODELS[name],
        # vLLM refuses a max_model_len past the model's positions.
        max_position_embeddings=max(4096, max_len),
    )
    model = Qwen3ForCausalLM(config, rngs=nnx.Rngs(0))
    num_params = sum(x.size for x in jax.tree.leaves(nnx.state(model, nnx.Param)))
    episodes = workload.tasks * workload.rollouts
    # Another draw of the same workload meets (and compiles) the shapes the timed run will.
    warmup = workload if full_warmup else dataclasses.replace(workload, rollouts=2, turns=(3, 3))
    print(f"\n{name}: {num_params:,} params, {episodes} episodes, contexts up to {max_len:,}")
    print(
        f"{'sampler':>14}{'wall s':>9}{'episodes/s':>12}{'gen tok/s':>11}{'prefill computed':>18}"
        f"{'unique':>9}{'ratio':>7}{'KV MiB':>8}{'peak MiB':>10}{'preempted':>11}"
        f"{'same tokens':>13}"
    )
    reference = None
    for kind in samplers:
        if kind == "vllm":
            from deepswe_jax.sampling.vllm_engine import VLLMSettings
            from deepswe_jax.sampling.vllm_sampler import VLLMSampler

            sampler = VLLMSampler(
                model, VLLMSettings(max_model_len=max_len, max_batch=episodes, dtype="float32")
            )
            sampler.sync_weights(nnx.state(model, nnx.Param))
            cache_bytes = episodes * max_len * config.kv_bytes_per_token(4)
        else:
            paged = kind == "jax_paged"
            sampler = JaxSampler(
                model,
                max_batch=episodes,
                max_cache_len=max_len,
                prefix_caching=kind != "jax_no_reuse",
                min_prefill_len=64,
                paged=paged,
                per_layer_weights=kind != "jax_stacked",
                max_cache_tokens=int(pool * episodes * max_len) if paged else None,
            )
            _, cache_bytes = memory_per_device(
                model,
                slots=episodes,
                max_cache_len=max_len,
                mesh=sampler._mesh,
                pages=sampler.cache_pages if paged else None,
            )
        asyncio.run(run_all(sampler, warmup, config.vocab_size, first_task=1000))
        before = dataclasses.replace(sampler.prefill_counts)
        compiled = dict(getattr(sampler, "compilations", {}))
        start = time.perf_counter()
        log = asyncio.run(run_all(sampler, workload, config.vocab_size))
        seconds = time.perf_counter() - start
        computed = sampler.prefill_counts.computed_tokens - before.computed_tokens
        peak_bytes, preempted = cache_bytes, getattr(sampler, "preemptions", 0)
        if getattr(sampler, "paged", False):
            peak_bytes = cache_bytes * sampler._prefixes.peak_held / sampler.cache_pages
        compiled = {
            step: count - compiled[step]
            for step, count in getattr(sampler, "compilations", {}).items()
            if count > compiled[step]
        }
        sampler.close()
        replies = {key: reply for key, _, reply in log}
        generated = sum(len(reply) for _, _, reply in log)
        unique = unique_prompt_tokens(log)
        if reference is None:
            reference = replies
        same = np.mean([replies.get(key) == reply for key, reply in reference.items()])
        print(
            f"{kind:>14}{seconds:>9.1f}{episodes / seconds:>12.3f}{generated / seconds:>11.0f}"
            f"{computed:>18,}{unique:>9,}{computed / unique:>7.2f}{cache_bytes / 2**20:>8.0f}"
            f"{peak_bytes / 2**20:>10.0f}{preempted:>11}{same:>13.2f}"
            + (f"  (compiled while timed: {compiled})" if compiled else ""),
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["tiny"], choices=list(MODELS))
    parser.add_argument(
        "--samplers", nargs="+", default=["jax", "jax_paged", "jax_no_reuse", "vllm"],
        choices=["jax", "jax_paged", "jax_no_reuse", "jax_stacked", "vllm"],
    )  # fmt: skip
    parser.add_argument(
        "--pool", type=float, default=1.0,
        help="jax_paged's pool of pages as a fraction of the dense cache's tokens",
    )  # fmt: skip
    parser.add_argument("--tasks", type=int, default=4)
    parser.add_argument("--rollouts", type=int, default=8)
    parser.add_argument("--prompt_len", type=int, default=1000)
    parser.add_argument("--turns", type=int, nargs=2, default=[10, 20])
    parser.add_argument("--reply", type=int, nargs=2, default=[32, 128])
    parser.add_argument("--observation", type=int, nargs=2, default=[100, 400])
    parser.add_argument(
        "--short_warmup", action="store_true",
        help="warm up on 2 episodes x 3 turns per task instead of a whole other draw (faster; "
        "the timed run then includes compiling the shapes the warm-up missed)",
    )  # fmt: skip
    args = parser.parse_args()
    workload = Workload(
        args.tasks,
        args.rollouts,
        args.prompt_len,
        tuple(args.turns),
        tuple(args.reply),
        tuple(args.observation),
    )
    print(
        f"agent workload {workload}, greedy, float32, on {jax.default_backend()} "
        f"({len(os.sched_getaffinity(0))} cores), load {os.getloadavg()[0]:.1f}; jax "
        f"{jax.__version__}"
    )
    for name in args.models:
        run_model(name, workload, args.samplers, not args.short_warmup, args.pool)


if __name__ == "__main__":
    main()
