"""Every config field, in one place, with its default and meaning (DeepSWE-Preview's value where
the recipe fixes one; configs/deepswe_qwen3_32b.py sets the rest): the schema of all configs.

Experiment configs start from `get_config()` and change what differs; the config it returns is
locked, so a field that is not declared here cannot be set: not by an experiment config, not
by a `--config.x=y` override (launch scripts refuse one naming an unknown field, or a value of
the wrong type, before any work starts). Adding a field is one line here, with its comment,
plus its use in deepswe_jax/experiment (the only code that reads configs). Sections:

  model.*       HF Qwen3 config.json fields (Qwen3-32B here).
  mesh.*        device mesh axis sizes.
  rl.*          GRPO++ training: optimizer, loss, batch, loop.
  agent.*       episode limits (tokens, steps, seconds) and the agent interface.
  sampler.*     rollout sampler and sampling parameters.
  env.*         task file and environments (Docker containers or Kubernetes pods).
  checkpoint.*  Orbax checkpoints of a training run.
  sft.*         supervised fine-tuning (launch/train_sft.py).
  verifier.*    the execution-free outcome verifier (launch/train_verifier.py).
"""

import ml_collections

from deepswe_jax.parallel import DEFAULT_RULES


def get_config() -> ml_collections.ConfigDict:
    """Returns the base config (locked): Qwen3-32B trained with DeepSWE's GRPO++
    hyperparameters."""
    config = ml_collections.ConfigDict()
    config.seed = 0  # PRNG seed for init, sampling and data order

    # HF Qwen3 config.json fields, as in the model's config.json.
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
    config.param_dtype = "float32"  # dtype parameters and optimizer state are stored in
    config.compute_dtype = "bfloat16"  # dtype of activations and matmuls
    config.remat = "full"  # rematerialization: 'none' | 'full' | 'save_dots' | 'offload'
    # layers per iteration of the training forward's layer scan (>= layers: unrolled); unrolling
    # compiles longer in proportion, so deep models keep 1
    config.scan_unroll = 1
    # Full-sequence attention kernel (model/attention.py): 'xla' (CPU; dense [heads, seq, seq]
    # scores) | 'cudnn' (GPU: cuDNN flash attention with sequence lengths; packed rows take the
    # Pallas kernel) | 'pallas' (GPU: the Pallas flash kernel with segment ids; interpret mode
    # on CPU).
    config.attention = "xla"

    config.mesh = ml_collections.ConfigDict(
        dict(
            data=1,  # data-parallel replicas; -1 (on one axis) = all remaining devices
            fsdp=-1,  # parameter/optimizer sharding (and batch) ways
            tensor=1,  # tensor-parallel ways (heads, mlp, vocab)
        )
    )
    # (logical axis, mesh axis | tuple of mesh axes | None = replicated) pairs
    # (parallel/sharding.py); a mesh axis must divide every dimension it shards.
    config.sharding_rules = DEFAULT_RULES

    config.init_from = ""  # '' (random init) | HF directory | Orbax checkpoint directory
    config.tokenizer = ""  # local HF tokenizer directory (tokenizer.json)

    config.rl = ml_collections.ConfigDict(
        dict(
            lr=1e-6,  # AdamW learning rate (constant after warmup)
            b1=0.9,  # AdamW beta1
            b2=0.999,  # AdamW beta2
            weight_decay=0.01,  # AdamW decoupled weight decay, on every parameter
            grad_clip=1.0,  # global-norm gradient clipping; 0 = off
            warmup_steps=0,  # linear warmup of the learning rate from 0, in optimizer steps
            eps_low=0.2,  # PPO clip below: ratio >= 1 - eps_low
            eps_high=0.28,  # clip-high: ratio <= 1 + eps_high
            loss_mode="seq_sum_const",  # 'seq_sum_const' | 'token_mean' | 'seq_mean_token_mean'
            # the sequences a per-sequence loss_mode divides by: 'all' (DeepSWE: every
            # trajectory of the batch, compact-filtered ones included, as verl's
            # seq-mean-token-sum) | 'trained' (only those with a loss token)
            loss_sequences="all",
            advantage="loo",  # 'loo' (leave-one-out) | 'grpo' | 'drgrpo'
            compact_filtering=True,  # mask max_steps/max_context/timeout episodes out of the loss
            n_rollouts=8,  # rollouts per task (the group of the advantage)
            tasks_per_step=64,  # tasks per RL iteration
            micro_batch_size=64,  # rows per gradient-accumulation step, across all devices
            # row lengths batches are padded to (each trajectory gets the smallest that fits);
            # () = powers of two up to agent.max_prompt_tokens + agent.max_context, which is the
            # last bucket (36,864 pads to 36,864, not 65,536)
            length_buckets=(),
            num_iterations=1,  # passes over each batch (verl's ppo_epochs; DeepSWE: 1)
            # optimizer steps per pass: the batch's task groups split in order into this many
            # mini-batches, each normalised on its own (verl's ppo_mini_batch_size =
            # tasks_per_step / mini_batches); must divide tasks_per_step. 1 = one step per batch
            # (DeepSWE's 8B script); rLLM's DeepSWE 32B script takes 8 (configs/deepswe_qwen3_32b.py)
            mini_batches=1,
            logprob_chunk=1024,  # sequence positions per chunk of the log-prob computation
            # > 1: the vocabulary head scores only loss positions, gathered per row into k/B of
            # the row length (<= B programs per length; LossSettings). 1 = every position.
            loss_position_buckets=1,
            total_steps=200,  # RL iterations of a run
            # peak FLOP/s of one device for the MFU metric (e.g. 989e12, H100 bf16); None = off
            peak_flops_per_device=ml_collections.config_dict.placeholder(float),
            overlap=False,  # roll out iteration k+1 while iteration k trains (rl/overlap.py)
            max_staleness=1,  # with overlap: rollouts from a policy at most this many updates old
            # Correction for the sampler-trainer mismatch with rho = pi_old / pi_sampler per
            # token, verl 0.9.1's algorithm.rollout_correction (names, defaults, semantics;
            # rl/rollout_correction.py). Off by default: DeepSWE trained without it.
            rollout_correction=ml_collections.ConfigDict(
                dict(
                    # IS weight on each token's clipped loss: '' (off) | 'token' (rho_t) |
                    # 'sequence' (product of the sequence's rho)
                    rollout_is="",
                    # 'C': truncate the weight at C (TIS) | 'lower_upper': weight 0 outside
                    # [lower, upper] (masked IS, verl's IcePop)
                    rollout_is_threshold="2.0",
                    # rejection (tokens or sequences leave the loss mask): '' (off) |
                    # comma-separated token_k1/k2/k3, seq_sum_k1/k2/k3, seq_mean_k1/k2/k3
                    # (seq_mean_k1: geometric-mean mask), seq_max_k2/k3
                    rollout_rs="",
                    # one threshold for all rollout_rs options or one per option, comma-separated;
                    # k1 options 'lower_upper' ratio bounds ('C' = 1/C and C), the others an
                    # upper bound
                    rollout_rs_threshold="",
                )
            ),
        )
    )
    config.agent = ml_collections.ConfigDict(
        dict(
            max_steps=50,  # agent turns per episode
            max_prompt_tokens=4096,  # longest prompt (system + issue); longer stops at once
            max_context=32768,  # token budget after the prompt (assistant + observations)
            step_timeout=90.0,  # seconds per tool call
            trajectory_timeout=5400.0,  # seconds per episode
            reward_timeout=300.0,  # seconds per grading
            # response tokens after which each observation says "submit now" (28K of 32K)
            submit_notice_tokens=28672,
            # what the agent is shown and how its calls run: 'deepswe_jax' (ours) | 'r2egym'
            # (R2E-Gym's as DeepSWE-Preview was trained with, byte for byte; agent/r2egym.py)
            interface="deepswe_jax",
            # R2E-Gym's prompts for 'r2egym' (its edit_non_fn_calling.yaml or rLLM's
            # system_prompts.py; required there, '' for ours)
            prompts_file="",
            # our interface's prompt style: 'full' (R2E-Gym's structure, ~1K tokens of
            # instructions) | 'compact' (a few lines and the issue, ~150 tokens, for small
            # models; agent/prompts.py); 'r2egym' takes only 'full'
            prompt="full",
        )
    )
    config.sampler = ml_collections.ConfigDict(
        dict(
            kind="vllm",  # 'jax' (in-process JaxSampler) | 'vllm' (an in-process vLLM engine)
            temperature=1.0,  # sampling temperature (the trainer scores at the same one)
            top_p=1.0,  # nucleus sampling; 1.0 = off
            top_k=0,  # top-k sampling; 0 = off
            # Each agent turn's request carries its own seed (from config.seed, the task, the
            # rollout, the policy version and the turn: agent.rollout.turn_seed), so a run's
            # episodes sample the same tokens whatever the container timing, and a resumed run
            # what an uninterrupted one would. False: the sampler's own stream, whose draws
            # follow the order requests arrive in (rLLM / verl: vLLM without per-request seeds).
            seeded_requests=True,
            max_batch=512,  # sequences decoded at once (JaxSampler slots, vLLM's max_num_seqs)
            # vLLM: a HF directory whose config.json describes the policy ('' = written from
            # config.model); the weights always come from the trainer.
            hf_dir="",
            # vLLM engine (sampling/vllm_engine.VLLMSettings), colocated with the trainer:
            # dtype of the engine's weights (synced from the trainer in this dtype) and compute;
            # 'jax': the JaxSampler's compute and KV cache (weights kept in param_dtype), so a
            # bf16 sampler beside an fp32 trainer has vLLM's mismatch (rl.rollout_correction).
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
            # GPUs one engine spans (vLLM tensor parallelism: spawned workers, CUDA IPC sync);
            # launch/plan_memory.py --sampler plans the engines' memory.
            tensor_parallel_size=1,
            # Consecutive JAX processes that share one engine; the first owns it, rolls out
            # and alone receives the synced weights (1 = an engine per process).
            processes_per_engine=1,
            # Free the engine's memory while the trainer steps (GPU sleep mode; CPU has none).
            sleep=True,
            # Fraction of each GPU JAX preallocates (XLA_PYTHON_CLIENT_MEM_FRACTION, set before
            # JAX initializes); 0 = JAX's default (75%), which leaves too little for vLLM.
            jax_memory_fraction=0.0,
            # the 'jax' sampler's KV cache budget in tokens: slots = min(max_batch,
            # budget // (max_prompt_tokens + max_context)); 0 = max_batch slots; a cache that
            # cannot fit the devices is refused
            max_cache_tokens=0,
            # the 'jax' sampler keeps finished requests' keys/values and computes only what
            # follows a prompt's longest cached prefix (an episode's earlier turns, a group's
            # shared prompt); False recomputes every prompt whole (vLLM always caches prefixes)
            prefix_caching=True,
            # the 'jax' sampler's cache in pages of 16 tokens that rows take as they grow, from
            # a pool of max_cache_tokens (0: max_batch full rows' worth); shared prompts share
            # pages; when the pool runs out the newest request is preempted and run again
            # (vLLM's PagedAttention). False: each row reserves a full-length row. The pool is
            # split over kv heads only: on a mesh with data/fsdp > 1 every device holds it whole,
            # where a dense cache splits its rows. CPU configs (tiny.py) turn it off: XLA:CPU
            # gathers pages at about half a slice's speed.
            paged=True,
            # how a decode step reads the paged cache: 'pallas', a kernel reading each row's
            # own pages where they lie (model/paged_kernel.py); 'xla', every row's pages
            # gathered into a dense copy as long as the longest row (64 rows x 32K tokens is
            # GBs per layer on a GPU; on CPU each row reads its own length). The kernel has run
            # in Pallas interpret mode only (no GPU yet): 'xla' is the fallback.
            paged_attention="pallas",
        )
    )
    config.env = ml_collections.ConfigDict(
        dict(
            tasks="tasks/tasks.jsonl",  # task file (jsonl, json, parquet) or HF dataset rows
            max_envs=512,  # environments (containers or pods) alive at once
            mem_limit="4g",  # memory limit of an environment (Docker and Kubernetes)
            cpus=1.0,  # CPU limit of an environment (Docker and Kubernetes)
            pids_limit=512,  # process limit of a Docker container
            # Bytes a Docker container (episode or grading) may write ('' for no limit), and
            # how: 'auto' | 'storage_opt' (--storage-opt size=: the whole writable layer; needs
            # overlay2 on xfs with pquota, btrfs or zfs) | 'tool_server' (no file past the
            # limit, commands stopped once the container wrote more; see
            # env/docker/disk_limits.DISK_LIMIT_MODES). 'auto': storage_opt where the engine has it.
            # Size it so max_envs containers fit the Docker host's disk. Pods:
            # env.kubernetes.ephemeral_storage.
            disk_limit="10g",
            disk_limit_mode="auto",  # see disk_limit
            # The largest patch an episode may produce (bytes of the changed files, and of the
            # patch): a larger one is graded 'patch_too_large', reward 0, trained on.
            max_patch_bytes=4 << 20,
            # Where episodes, grading and execution checks run: 'docker' | 'kubernetes'.
            backend="docker",
            # Docker endpoints (unix://, tcp://, ssh://); empty: the local engine.
            docker_hosts=(),
            envs_per_host=0,  # most containers per Docker host; 0 = no cap beyond max_envs
            # backend='kubernetes': env.k8s_pods.K8sPodSettings (same names and defaults).
            kubernetes=ml_collections.ConfigDict(
                dict(
                    # Credentials: '' is the in-cluster service account, else $KUBECONFIG or
                    # ~/.kube/config; or a kubeconfig file path.
                    kubeconfig="",
                    context="",  # context of the kubeconfig to use; '' = its current one
                    namespace="deepswe",  # namespace of the env pods
                    # Put before each task image: the registry the images were pushed to, e.g.
                    # 'registry.example.com/' (launch/k8s_manifests.py --image_prefix).
                    image_prefix="",
                    ephemeral_storage="10Gi",  # scratch disk limit of an env pod
                    image_pull_policy="IfNotPresent",  # of the env pods' task images
                    # Node labels env pods must run on, as 'key=value' strings.
                    node_selector=(),
                    start_timeout_s=300.0,  # seconds a pod may take to start
                    # Seconds a leaked pod lives at most (an episode plus its grading is less).
                    active_deadline_s=4 * 3600,
                )
            ),
        )
    )
    config.checkpoint = ml_collections.ConfigDict(
        dict(
            every=10,  # save every k training steps (and the last)
            keep=3,  # keep the newest n steps
            async_save=True,  # write in the background while training continues
        )
    )
    # Rejection-sampling / expert SFT (SWE-Gym); its AdamW has the fields of rl's.
    config.sft = ml_collections.ConfigDict(
        dict(
            lr=1e-5,  # AdamW learning rate (peak, after warmup)
            b1=0.9,  # AdamW beta1
            b2=0.95,  # AdamW beta2
            weight_decay=0.0,  # AdamW decoupled weight decay
            grad_clip=1.0,  # global-norm gradient clipping; 0 = off
            warmup_steps=10,  # linear warmup, in optimizer steps
            cosine_decay=True,  # decay the learning rate to 0 at num_steps; False = constant
            num_steps=200,  # optimizer steps (epochs reshuffle the data with the seed)
            batch_size=64,  # trajectories per optimizer step
            micro_batch_size=8,  # rows per forward/backward
            max_per_task=2,  # rejection-sampling cap of trajectories per task (SWE-Gym: 2)
            length_buckets=(),  # row lengths (prompt + context must fit); () = powers of two
            max_tokens=0,  # train on the first max_tokens tokens of a trajectory; 0 = all
            # the scripted expert's demonstration (verify/expert.py): 'view_edit_test' (view,
            # edit, run the tests, finish) | 'edit' (one minimal str_replace per hunk, finish)
            expert_script="view_edit_test",
        )
    )
    # The execution-free verifier (SWE-Gym); its optimizer is rl's AdamW, its micro-batches
    # rl.micro_batch_size rows.
    config.verifier = ml_collections.ConfigDict(
        dict(
            max_prompt_tokens=32768,  # budget of a rendered trajectory (long thoughts condensed)
            lora_rank=64,  # LoRA adapters' rank (SWE-Gym: r=64 beat full fine-tuning); 0 = full
            lora_alpha=16.0,  # LoRA scale numerator (scale = alpha / rank)
            # kernels that get adapters (model/lora.py KERNEL_INPUT_DIMS names)
            lora_targets=(
                "q_proj",
                "k_proj",
                "v_proj",
                "o_proj",
                "gate_proj",
                "up_proj",
                "down_proj",
            ),
            max_per_task=2,  # at most this many resolved and unresolved trajectories per task
            heldout_fraction=0.25,  # tasks held out for the AUC (split by task, seeded)
            steps=100,  # optimizer steps
            batch_size=16,  # examples per step
            eval_every=25,  # held-out scoring every k steps (and at the end)
            eval_batch_size=8,  # held-out prompts per forward pass
        )
    )
    config.lock()
    return config
