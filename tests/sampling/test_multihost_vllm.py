"""Multi-process weight sync into vLLM: two JAX CPU processes (2 devices each, gloo collectives,
launch/multihost_local.sh) hold the trainer's sharded fp32 params and share one engine
(config.sampler.processes_per_engine=2). Process 0 owns the engine and ends up with the bf16
weights; process 1 takes part in the layer-by-layer extraction (a collective), never gathers the
model to host memory, and never holds more than one layer (or the embedding) on its devices.

The engine's greedy tokens are then scored by the fp32 trainer model of one process built from
the same seed: the engine's bf16 logprobs are close to those of the synced params and far from
another seed's.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
PROMPTS = [[5, 17, 300, 41, 2048], [9] * 12]
NEW_TOKENS = 16


def small_config():
    from configs import tiny

    config = tiny.get_config()
    config.mesh.update(data=1, fsdp=-1, tensor=1)
    config.model.num_hidden_layers = 4
    config.agent.update(max_prompt_tokens=64, max_context=64)
    config.sampler.update(kind="vllm", dtype="bfloat16", max_batch=2, processes_per_engine=2)
    return config


def worker(out_dir: Path) -> None:
    """Syncs the trainer's params into the shared engine; writes process_<i>.json."""
    from deepswe_jax.parallel.distributed import initialize_distributed

    initialize_distributed()
    import asyncio

    import jax
    from flax import nnx
    from jax.experimental import multihost_utils

    from deepswe_jax import experiment
    from deepswe_jax.rl import loop
    from deepswe_jax.sampling import GenerateRequest, SamplingParams

    config = small_config()
    rules = experiment.sharding_rules(config)
    trainer = experiment.make_trainer(config, experiment.device_mesh(config), rules)
    params = experiment.initial_params(config, trainer.mesh, rules)
    model = nnx.merge(trainer.graphdef, params)
    sampler = experiment.make_sampler(config, model, trainer.mesh, rules, seed=0)
    host_gathers = []
    for module, name in ((multihost_utils, "process_allgather"), (jax, "device_get")):
        original = getattr(module, name)

        def counted(*args, _original=original, _name=name, **kwargs):
            host_gathers.append(_name)
            return _original(*args, **kwargs)

        setattr(module, name, counted)

    def live_local_bytes() -> int:
        """Bytes of distinct buffers on this process's devices (a global array and its shards'
        arrays share theirs)."""
        gc.collect()
        buffers = {}
        for array in jax.live_arrays():
            for shard in array.addressable_shards:
                buffers[shard.data.unsafe_buffer_pointer()] = shard.data.nbytes
        return sum(buffers.values())

    before = live_local_bytes()
    sampler.sync_weights(loop.published_weights(params, sampler))
    result = {
        "owns_engine": sampler.owns_engine,
        "last_sync": sampler.last_sync,
        "host_gathers": list(host_gathers),
        "held_after_sync": live_local_bytes() - before,
        "model_bytes": sampler._extractor.hf_bytes(),
        "local_devices": jax.local_device_count(),
        "checksums": [float(jax.numpy.sum(leaf)) for leaf in jax.tree.leaves(params)],
        "shares": [len(loop.rollout_share(list(range(6)), 2))],
    }
    if sampler.owns_engine:
        greedy = SamplingParams(temperature=0.0, max_new_tokens=NEW_TOKENS)
        requests = [GenerateRequest(tuple(p), greedy) for p in PROMPTS]
        completions = asyncio.run(sampler.generate(requests))
        result["tokens"] = [list(c.token_ids) for c in completions]
        result["logprobs"] = [list(c.logprobs) for c in completions]
    else:
        with pytest.raises(RuntimeError, match="owns no vLLM engine"):
            asyncio.run(sampler.generate([]))
    sampler.close()
    (out_dir / f"process_{jax.process_index()}.json").write_text(json.dumps(result))


def trainer_logprobs(seed: int, prompt: list[int], tokens: list[int]) -> np.ndarray:
    """The fp32 trainer model's logprobs of `tokens` after `prompt` (one process)."""
    import jax.numpy as jnp

    from deepswe_jax.experiment import model_factory
    from deepswe_jax.rl.logprobs import token_logprobs

    config = small_config()
    config.seed = seed
    model = model_factory(config)()
    sequence = jnp.array([prompt + tokens])
    hidden = model.hidden_states(sequence[:, :-1])
    logprobs, _ = token_logprobs(hidden, model.unembed_matrix(), sequence[:, 1:])
    return np.asarray(logprobs[0, len(prompt) - 1 :])


def test_two_processes_sync_into_one_engine_owned_by_the_first(tmp_path: Path):
    import jax
    from flax import nnx

    from deepswe_jax.experiment import model_factory

    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    env.pop("XLA_FLAGS", None)
    command = ["bash", "launch/multihost_local.sh", "2", "2", sys.executable, __file__]
    result = subprocess.run(
        [*command, str(tmp_path)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-5000:]
    owner, other = (json.loads((tmp_path / f"process_{i}.json").read_text()) for i in (0, 1))

    assert owner["owns_engine"] and not other["owns_engine"]
    assert owner["shares"] == [6] and other["shares"] == [0]  # only the owner rolls out
    assert owner["last_sync"]["bytes"] == owner["model_bytes"]  # bf16, what the engine holds
    assert other["last_sync"]["bytes"] == 0
    for process in (owner, other):
        assert process["host_gathers"] == []  # no host copy of the model on any process
    # The non-owner held at most one program's output at once (a layer, or the embedding and
    # final norm), replicated on its 2 devices, and nothing of it after the sync.
    config = small_config()
    c = config.model
    embed = 2 * c.vocab_size * c.hidden_size + 2 * c.hidden_size
    assert 0 < other["last_sync"]["peak_local_bytes"] <= other["local_devices"] * embed
    assert (
        other["last_sync"]["peak_local_bytes"] < other["local_devices"] * owner["model_bytes"] / 2
    )
    for process in (owner, other):  # no JAX copy of the weights outlives the sync
        assert abs(process["held_after_sync"]) < 64 << 10

    # The engine got the trainer's params: same seed, same checksums in one process.
    params = jax.tree.leaves(nnx.state(model_factory(config)(), nnx.Param))
    np.testing.assert_allclose(owner["checksums"], [float(p.sum()) for p in params], rtol=1e-5)
    synced, other_seed = [], []
    for prompt, tokens, logprobs in zip(PROMPTS, owner["tokens"], owner["logprobs"], strict=True):
        synced.append(np.abs(trainer_logprobs(config.seed, prompt, tokens) - logprobs).mean())
        other_seed.append(
            np.abs(trainer_logprobs(config.seed + 1, prompt, tokens) - logprobs).mean()
        )
    assert max(synced) < 0.05 and min(other_seed) > 10 * max(synced)


if __name__ == "__main__":
    worker(Path(sys.argv[1]))
