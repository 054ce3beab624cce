"""The agent: what the model is told, how its replies act on an environment, and the episode
as training data. Knows no JAX model, only the `Sampler` protocol.

prompts           everything the agent is told: function specs, system and instance prompts
parsing           the function call out of a reply (never raises on bad output)
interface         AgentInterface: prompt, parse, step, observation message (ours)
r2egym            R2E-Gym's interface as rLLM v0.1 drove it for DeepSWE-Preview
chat              Qwen3 chat format as token ids, built from exactly the sampled tokens
rollout           the multi-turn episode loop and collect_rollouts (n episodes per task)
trajectory        Trajectory, StopReason, jsonl records
scripted_policy   replays a gold patch through the agent's tools (expert data, checks)
"""
