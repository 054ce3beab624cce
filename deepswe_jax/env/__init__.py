"""Task environments: containers holding a repository, the agent's tools inside them, and
grading in fresh ones. Never imports JAX (environment workers run on CPU-only hosts).

Core, here (what the agent and RL loops use; knows runtimes only by the Runtime protocol):
  tasks, task_record, training_data,  task records and loaders (SWE-bench, SWE-Gym, R2E-Gym,
  r2egym_rows, diffs, commits         ours)
  protocols, environment, pool        EnvPoolProtocol; one Env (tool calls in, observations out);
                                      EnvPool (many at once, retries, grading slots), the one
                                      core module that composes the rooms below
  runtime, layouts, observation,      the Runtime protocol, image layouts, observation wording,
  ownership                           the labels that say which run owns a container or pod
  tools/                              the in-container tool scripts and tool_server.py (PID 1)
  r2egym                              R2E-Gym's own tools on our runtimes (agent.interface=r2egym)
Rooms (sub-packages; tests/test_import_rules.py keeps them apart):
  docker/    containers on Docker engines: runtime, hosts, placement, images, disk limits
  k8s/       pods on a Kubernetes cluster (K8sPodFactory)
  grading/   grade_patch, GradeResult, the test harnesses, patch and verdict guards
"""
