"""Evaluation and the SWE-Gym methods: Pass@k, reports, verifiers, best-of-k, rejection sampling.

metrics              pass@k, Pass@1 averaged over runs, Best@k curves
evaluation/          the evaluation runner, its resumable store, SWE-bench reports, shards, plots
select               best-of-k selection over per-candidate scores
verifier             execution-free outcome verifier (a Qwen3 reading a trajectory)
verifier_training    training it on graded trajectories
execution            execution-based checks of candidate patches in fresh containers
rejection_sampling   which trajectories an SFT round trains on
expert               expert trajectories from gold patches (SFT warm starts)
run_summary          the main job's end-of-run summary and training curve
"""
