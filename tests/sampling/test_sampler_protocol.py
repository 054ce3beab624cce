"""The Sampler protocol's declared members: what the RL loop reads of a sampler without
guessing (`syncs_global_arrays` is declared, not looked up with a default)."""

from __future__ import annotations

import jax.numpy as jnp
import pytest

from deepswe_jax.rl.loop import published_weights
from deepswe_jax.sampling.base import Sampler
from deepswe_jax.sampling.jax_sampler import JaxSampler
from deepswe_jax.sampling.scripted import ScriptedSampler
from deepswe_jax.sampling.vllm_sampler import VLLMSampler


def test_every_sampler_declares_whether_it_syncs_global_arrays():
    assert isinstance(Sampler.__dict__["syncs_global_arrays"], property)
    declared = {
        cls.__name__: cls.syncs_global_arrays for cls in (JaxSampler, VLLMSampler, ScriptedSampler)
    }
    assert declared == {"JaxSampler": False, "VLLMSampler": True, "ScriptedSampler": False}


def test_published_weights_reads_the_declaration():
    params = {"w": jnp.ones(2)}
    # One process: the params as they are, whichever the sampler.
    assert published_weights(params, ScriptedSampler([[1]])) is params

    class Undeclared:
        """A sampler written against the old protocol: it says nothing about global arrays."""

        async def generate(self, requests):
            return []

    # No silent default: a sampler that does not declare the member is an error, also with
    # one process, so a missing declaration shows up before a multi-host run.
    with pytest.raises(AttributeError, match="syncs_global_arrays"):
        published_weights(params, Undeclared())
