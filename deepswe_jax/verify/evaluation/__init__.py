"""Evaluate a policy on a task set: k runs per task, SWE-bench outputs, Pass@1, pass@k, Best@k.

    run       the runner: `evaluate` (async, in a caller's env pool) and `run_evaluation` (its
              own event loop; one process's share of a multi-process run); the policies
    predictions  a SWE-bench predictions file (any agent's) as a policy: its patches, graded
    store     the resumable store: eval_config.json, trajectories.jsonl, scores.jsonl
    scoring   candidate scorers for Best@k (verifier, execution checks) and scores.jsonl
    reports   the SWE-bench files: predictions.jsonl, report.json, run_report.json
    summary   summary.json, and every output of the finished pairs (`write_results`)
    plots     curves.png
    shards    several processes over one task set, and `merge_shards`

output_dir:

    eval_config.json          what is evaluated; resuming with other settings is refused
    trajectories.jsonl        one Trajectory per finished (task, run), appended as each ends
    scores.jsonl              per-candidate scores for selection (with selectors)
    run_00/predictions.jsonl  SWE-bench predictions {instance_id, model_name_or_path, model_patch}
    run_00/report.json        {instance_id: SWE-bench per-instance report}, graded runs only
    run_00/run_report.json    SWE-bench run report (every key of swebench 5.0.2's make_run_report):
                              resolved / unresolved / empty_patch / error ids, and which failures
                              look like the environment's (infra_failure_ids, failure_reasons)
    summary.json              Pass@1 +- stderr over runs, pass@k, Best@k, statuses, stop reasons,
                              mean steps and tokens
    curves.png                pass@k (and Best@k with selectors) against k
    shard_1-of-4/             process 1 of 4's share of a multi-process evaluation (shards)

A run is resolved when the grader resolves its final patch, however the episode stopped
(`Trajectory.resolved`): what the official SWE-bench harness says of predictions.jsonl (RL
rewards count finished episodes only).
"""
