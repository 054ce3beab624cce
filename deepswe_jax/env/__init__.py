"""Task environments: containers holding a repository, the agent's tools inside them, and
grading in fresh ones. Never imports JAX (environment workers run on CPU-only hosts).

Core (what the agent and RL loops use):
  tasks, training_data, r2egym_rows   task records and loaders (SWE-bench, SWE-Gym, R2E-Gym, ours)
  protocols, environment, pool        EnvPoolProtocol; one Env (tool calls in, observations out);
                                      EnvPool (many at once, retries, grading slots)
  runtime, layouts, observation       the Runtime protocol, image layouts, observation wording
  tools/                              the in-container tool scripts and tool_server.py (PID 1)
  r2egym                              R2E-Gym's own tools on our runtimes (agent.interface=r2egym)
Docker:
  docker_runtime, docker_channel, docker_api, hosts, placement, images, ownership
Kubernetes:
  k8s_runtime, k8s_pods, k8s_exec
Grading:
  grading (grade_patch), harness, harness_swebench, harness_r2egym, patches, diffs, commits
"""
