"""The learning recipe on 2 CPU cores (issue 15): the tiny Qwen3 on tasks/oneline.

    ./run.sh            # = the three commands below, in runs/learn_tiny/
    python launch/train_sft.py --config=configs/learn_tiny.py --workdir=runs/learn_tiny/sft \\
        --expert_tasks=tasks/oneline/train_small.jsonl
    python launch/train.py --config=configs/learn_tiny.py --workdir=runs/learn_tiny/rl \\
        --config.init_from=runs/learn_tiny/sft/checkpoints
    python launch/evaluate.py --config=configs/learn_tiny.py --policy=runs/learn_tiny/rl/checkpoints \\
        --tasks=tasks/oneline/held_out.jsonl --num_runs=4 --output_dir=runs/learn_tiny/eval_rl

1. Expert data: the scripted expert's "edit" script (one minimal str_replace copied from the
   issue, then finish) on the 8 tasks of tasks/oneline/train_small.jsonl, through real Docker.
2. SFT warm start to partial competence: few enough steps that sampled episodes at T=1.0 are
   resolved sometimes, not always, so GRPO++ groups have mixed outcomes.
3. GRPO++ (DeepSWE's loss: leave-one-out advantages, clip-high, compact filtering,
   seq_sum_const) at T=1.0 on the same 8 tasks.
4. Held-out evaluation (tasks/oneline/held_out.jsonl: names and numbers no training task holds).

Measured so far (BENCHMARKS.md, "Learning"): 100 SFT steps on the 8 demonstrations reach
about 50% of episodes resolved at T=1.0 on those tasks (80 steps: 0%); SFT on all 192 training
tasks for 300 steps resolves 11% of training and 0% of held-out episodes: copying unseen names
into the path is what a model of this size does not learn in CPU-minutes. RL: a fresh AdamW at
lr 1e-3 without warmup moves every parameter by ~lr on its first step and collapses the policy
(reward 0.28 -> 0); hence the warmup.

The compact prompt keeps an episode to a few hundred tokens: prompt ~200, the edit and its
observation ~150, finish ~40. BENCHMARKS.md ("Learning") has the measurements behind the
sizes, steps and learning rates.
"""

import ml_collections

from configs import tiny


def get_config() -> ml_collections.ConfigDict:
    config = tiny.get_config()
    config.seed = 0
    config.env.update(tasks="tasks/oneline/train_small.jsonl", max_envs=8, mem_limit="512m")
    config.agent.update(
        prompt="compact",
        max_steps=3,
        max_prompt_tokens=320,
        max_context=320,
        submit_notice_tokens=320,
        trajectory_timeout=300.0,
    )
    config.sampler.update(kind="jax", temperature=1.0, max_batch=32)
    config.sft.update(
        expert_script="edit",
        lr=3e-3,
        b2=0.95,
        warmup_steps=10,
        cosine_decay=True,
        num_steps=100,
        batch_size=8,
        micro_batch_size=8,
        max_per_task=1,
        length_buckets=(512,),
    )
    config.rl.update(
        lr=5e-4,
        b2=0.95,
        weight_decay=0.0,
        warmup_steps=5,
        n_rollouts=8,
        tasks_per_step=4,
        micro_batch_size=32,
        logprob_chunk=640,
        length_buckets=(640,),
        total_steps=30,
        compact_filtering=True,
    )
    config.checkpoint.update(every=5, keep=2, async_save=False)
    return config
