"""Every config field, in one place, with DeepSWE-Preview's values where DESIGN.md gives one.

Experiment configs start from `get_config()` and change what differs. Field meanings:

  seed                 PRNG seed for init, sampling and data order.
  model.*              HF Qwen3 config.json fields (Qwen3-32B here).
  param_dtype          dtype parameters and optimizer state are stored in.
  compute_dtype        dtype of activations and matmuls.
  remat                rematerialization policy: 'none' | 'full' | 'save_dots' | 'offload'.
  attention            full-sequence attention kernel (model/attention.py): 'xla' (CPU; dense
                       [heads, seq, seq] scores) | 'cudnn' (GPU: cuDNN flash attention with
                       sequence lengths; packed rows take the Pallas kernel) | 'pallas' (GPU:
                       the Pallas flash kernel with segment ids; interpret mode on CPU).
  mesh.{data,fsdp,tensor}  device mesh axis sizes; -1 means "all remaining devices".
  sharding_rules       (logical axis, mesh axis | tuple of mesh axes | None) pairs.
  init_from            '' (random init) | HF directory | Orbax checkpoint directory.
  tokenizer            local tokenizer directory.
  rl.*                 optimizer (AdamW) and GRPO++ settings; micro_batch_size is sequences per
                       gradient-accumulation step across all devices; total_steps RL iterations;
                       peak_flops_per_device for the MFU metric (None: not reported);
                       overlap: roll out iteration k+1 while iteration k trains, from a policy
                       at most max_staleness updates old (rl/overlap.py);
                       loss_sequences: the sequences a per-sequence loss_mode divides by, 'all'
                       (DeepSWE: every trajectory of the batch, compact-filtered ones included,
                       as verl's seq-mean-token-sum) | 'trained' (only those with a loss token).
                       length_buckets: the row lengths training batches are padded to; ()
                       = powers of two up to agent.max_prompt_tokens + agent.max_context, which
                       is the last bucket (36,864 pads to 36,864, not 65,536).
  agent.*              episode limits (tokens, steps, seconds); past submit_notice_tokens
                       response tokens the agent is told to submit (28K of 32K in DeepSWE).
                       interface: what the agent is shown and how its calls run,
                       'deepswe_jax' (ours) | 'r2egym' (R2E-Gym's as DeepSWE-Preview was trained
                       with, byte for byte; agent/r2egym.py); prompts_file: R2E-Gym's prompts
                       for 'r2egym' (its edit_non_fn_calling.yaml or rLLM's system_prompts.py;
                       required there, '' for ours).
  sampler.*            rollout sampler ('jax' | 'vllm') and sampling parameters; the vLLM
                       engine's settings and its colocation with the trainer (dtype, memory,
                       tensor parallelism, sleep, JAX's memory fraction; see the comments;
                       launch/plan_memory.py --sampler plans the engines' memory);
                       max_cache_tokens: the 'jax' sampler's KV cache budget in tokens, slots =
                       min(max_batch, budget // (max_prompt_tokens + max_context)) (0 =
                       max_batch slots); a cache that cannot fit is refused.
  env.*                task file, environment limits (mem_limit and cpus hold for Docker
                       containers and Kubernetes pods alike; pids_limit for Docker only) and
                       backend: 'docker' (containers on docker_hosts, or the local engine) |
                       'kubernetes' (one pod per environment, settings in env.kubernetes.*;
                       launch/k8s/README.md).
  checkpoint.*         save every k steps, keep the last n, save asynchronously.
"""

import ml_collections

from deepswe_jax.parallel import DEFAULT_RULES


def get_config() -> ml_collections.ConfigDict:
    """Returns the base config: Qwen3-32B trained with DeepSWE's GRPO++ hyperparameters."""
    config = ml_collections.ConfigDict()
    config.seed = 0

    config.model = ml_collections.ConfigDict(
        dict(
            vocab_size=151936,
            hidden_size=5120,
            intermediate_size=25600,
            num_hidden_layers=64,
            num_attention_heads=64,
            num_key_value_heads=8,
            head_dim=128,
            rope_theta=1_000_000.0,
            rms_norm_eps=1e-6,
            tie_word_embeddings=False,
            max_position_embeddings=40960,
        )
    )
    config.param_dtype = "float32"
    config.compute_dtype = "bfloat16"
    config.remat = "full"
    config.attention = "xla"

    config.mesh = ml_collections.ConfigDict(dict(data=1, fsdp=-1, tensor=1))
    config.sharding_rules = DEFAULT_RULES

    config.init_from = ""
    config.tokenizer = ""

    config.rl = ml_collections.ConfigDict(
        dict(
            lr=1e-6,
            b1=0.9,
            b2=0.999,
            weight_decay=0.01,
            grad_clip=1.0,
            warmup_steps=0,
            eps_low=0.2,
            eps_high=0.28,
            loss_mode="seq_sum_const",
            loss_sequences="all",
            advantage="loo",
            n_rollouts=8,
            tasks_per_step=64,
            micro_batch_size=64,
            num_iterations=1,
            logprob_chunk=1024,
            total_steps=200,
            peak_flops_per_device=ml_collections.config_dict.placeholder(float),
            overlap=False,
            max_staleness=1,
            length_buckets=(),
        )
    )
    config.agent = ml_collections.ConfigDict(
        dict(
            max_steps=50,
            max_prompt_tokens=4096,
            max_context=32768,
            step_timeout=90.0,
            trajectory_timeout=5400.0,
            reward_timeout=300.0,
            submit_notice_tokens=28672,
            interface="deepswe_jax",
            prompts_file="",
        )
    )
    config.sampler = ml_collections.ConfigDict(
        dict(
            kind="vllm",
            temperature=1.0,
            top_p=1.0,
            top_k=0,
            max_batch=512,
            # vLLM: a HF directory whose config.json describes the policy ('' = written from
            # config.model); the weights always come from the trainer.
            hf_dir="",
            # vLLM engine (sampling/vllm_engine.VLLMSettings), colocated with the trainer:
            # dtype of the engine's weights (synced from the trainer in this dtype) and compute.
            dtype="bfloat16",
            # 'auto' (the installed vLLM build's platform) | 'cuda' | 'cpu'.
            device="auto",
            # GPU: fraction of each device's memory the engine may take (weights, KV cache,
            # activations): 0.9 for an engine alone (evaluation); beside the trainer it must
            # fit with what JAX holds (jax_memory_fraction; configs/deepswe_qwen3_32b.py).
            gpu_memory_utilization=0.9,
            # KV-cache bytes per engine; 0 = from gpu_memory_utilization (GPU), or room for
            # max_batch sequences of the longest context (CPU).
            kv_cache_bytes=0,
            # GPUs one engine spans (vLLM tensor parallelism: spawned workers, CUDA IPC sync).
            tensor_parallel_size=1,
            # Consecutive JAX processes that share one engine; the first owns it, rolls out
            # and alone receives the synced weights (1 = an engine per process).
            processes_per_engine=1,
            # Free the engine's memory while the trainer steps (GPU sleep mode; CPU has none).
            sleep=True,
            # Fraction of each GPU JAX preallocates (XLA_PYTHON_CLIENT_MEM_FRACTION, set before
            # JAX initializes); 0 = JAX's default (75%), which leaves too little for vLLM.
            jax_memory_fraction=0.0,
            max_cache_tokens=0,
        )
    )
    config.env = ml_collections.ConfigDict(
        dict(
            tasks="tasks/tasks.jsonl",
            max_envs=512,
            mem_limit="4g",
            cpus=1.0,
            pids_limit=512,
            # Bytes a Docker container (episode or grading) may write ('' for no limit), and
            # how: 'auto' | 'storage_opt' (--storage-opt size=: the whole writable layer; needs
            # overlay2 on xfs with pquota, btrfs or zfs) | 'tool_server' (no file past the
            # limit, commands stopped once the container wrote more; see
            # env/docker_runtime.DISK_LIMIT_MODES). 'auto': storage_opt where the engine has it.
            # Size it so max_envs containers fit the Docker host's disk. Pods:
            # env.kubernetes.ephemeral_storage.
            disk_limit="10g",
            disk_limit_mode="auto",
            # Where episodes, grading and execution checks run: 'docker' | 'kubernetes'.
            backend="docker",
            # Docker endpoints (unix://, tcp://, ssh://); empty: the local engine.
            docker_hosts=(),
            envs_per_host=0,
            # backend='kubernetes': env.k8s_pods.K8sPodSettings (same names and defaults).
            kubernetes=ml_collections.ConfigDict(
                dict(
                    # Credentials: '' is the in-cluster service account, else $KUBECONFIG or
                    # ~/.kube/config; or a kubeconfig file path, and a context in it ('' current).
                    kubeconfig="",
                    context="",
                    namespace="deepswe",
                    # Put before each task image: the registry the images were pushed to, e.g.
                    # 'registry.example.com/' (launch/k8s_manifests.py --image_prefix).
                    image_prefix="",
                    ephemeral_storage="10Gi",
                    image_pull_policy="IfNotPresent",
                    # Node labels env pods must run on, as 'key=value' strings.
                    node_selector=(),
                    start_timeout_s=300.0,
                    # Seconds a leaked pod lives at most (an episode plus its grading is less).
                    active_deadline_s=4 * 3600,
                )
            ),
        )
    )
    config.checkpoint = ml_collections.ConfigDict(dict(every=10, keep=3, async_save=True))
    return config
