# A stand-in for conda's shell hook (deepswe_jax.env.official_images): the `conda activate|deactivate` shell function
# over environments in /opt/miniconda3 (base) and /opt/miniconda3/envs/<name>. Works under
# `set -u`, as SWE-bench's eval scripts source it.
_CONDA_ROOT=/opt/miniconda3

conda() {
    local command="${1:-}" name prefix
    case "$command" in
        activate)
            name="${2:-base}"
            if [ "$name" = base ]; then prefix="$_CONDA_ROOT"; else prefix="$_CONDA_ROOT/envs/$name"; fi
            if [ ! -x "$prefix/bin/python" ]; then
                echo "EnvironmentNameNotFound: Could not find conda environment: $name" >&2
                return 1
            fi
            if [ -z "${_CONDA_PATH_BEFORE:-}" ]; then export _CONDA_PATH_BEFORE="$PATH"; fi
            export PATH="$prefix/bin:$_CONDA_ROOT/condabin:$_CONDA_PATH_BEFORE"
            export CONDA_PREFIX="$prefix" CONDA_DEFAULT_ENV="$name" CONDA_SHLVL=1
            ;;
        deactivate)
            if [ -n "${_CONDA_PATH_BEFORE:-}" ]; then export PATH="$_CONDA_PATH_BEFORE"; fi
            unset CONDA_PREFIX CONDA_DEFAULT_ENV _CONDA_PATH_BEFORE
            export CONDA_SHLVL=0
            ;;
        *)
            echo "conda (stand-in): only 'conda activate [env]' and 'conda deactivate'" >&2
            return 1
            ;;
    esac
}
