"""The connector's real data path on the CPU (``kvtier serve --backend shm``), end to end: vLLM's
stand-in (vllm_harness.py) keeps its KV tensors in shared memory and its forward writes real KV
bytes into them (real_kv.py: a function of each token's prefix, the layer and the half); the
worker attaches them; kvtier saves the blocks vLLM computed to its host tier and to storage,
vLLM's pool evicts them, and kvtier loads them back into other block ids of vLLM's; every loaded
block is compared byte for byte with the KV of its content. The harness's contract checks run
at every step too. About a minute.

Two settings, FlashAttention's layout (current vLLM) and MLA's latent (vLLM v0.11.0) each over
>= 10,000 loaded blocks in both:
- write-through, kvtier's host tier holding every prompt: synchronous host hits, waited for
  layer by layer;
- write-back, a host tier smaller than the prompts: blocks written back on eviction, stored,
  and loaded from storage (asynchronous loads).
FlashInfer's layout goes through file storage; a save corrupted on purpose must be caught.
Write-through with a host tier smaller than the prompts: synchronous hits evicted between
lookup and admission come back as load errors, which vLLM computes a step later."""

import json
import os
import sys
import tempfile
import unittest

from real_kv import BS, run_check
from vllm_harness import CURRENT, V0_11_0

MIN_BLOCKS = int(os.environ.get("KVTIER_REAL_KV_BLOCKS", "10000"))
# 40 prompts of 40 blocks: 1,600 blocks; a host tier of 2,000 holds them all, one of 1,200 not.
HOST_HOLDS_ALL = (f"cache.host_tokens={2000 * BS}",)
WRITE_BACK = ("cache.write_policy=write_back",)
MEMORY = ("storage.backend=memory",)


def show(figures):
    print(json.dumps(figures, indent=1), file=sys.stderr)


class RealDataPathOnTheCpu(unittest.TestCase):
    def check(self, figures, min_blocks, layer_waits=True):
        show(figures)
        self.assertEqual(figures["mismatches"], 0, figures["first_mismatches"])
        self.assertGreaterEqual(figures["blocks_checked"], min_blocks)
        self.assertEqual(figures["server_exit"], 0)
        if layer_waits:  # every layer of a synchronous load was waited for on its own
            self.assertEqual(sorted(figures["layer_wait_us"]),
                             [str(l) for l in range(figures["layers"])])

    def test_flash_attention_host_hits_current_vllm(self):
        self.check(run_check("flash_attn", "shm", CURRENT, MIN_BLOCKS,
                             storage=MEMORY + HOST_HOLDS_ALL), MIN_BLOCKS)

    def test_mla_latent_host_hits_vllm_0_11(self):
        self.check(run_check("mla", "shm", V0_11_0, MIN_BLOCKS,
                             storage=MEMORY + HOST_HOLDS_ALL), MIN_BLOCKS)

    def test_flash_attention_storage_loads_write_back(self):
        self.check(run_check("flash_attn", "shm", CURRENT, MIN_BLOCKS, storage=MEMORY + WRITE_BACK),
                   MIN_BLOCKS, layer_waits=False)

    def test_mla_latent_storage_loads_write_back(self):
        self.check(run_check("mla", "shm", V0_11_0, MIN_BLOCKS, storage=MEMORY + WRITE_BACK),
                   MIN_BLOCKS, layer_waits=False)

    def test_flashinfer_layout_through_file_storage(self):
        with tempfile.TemporaryDirectory() as d:
            figures = run_check("flashinfer", "shm", CURRENT, 2000, prompts=24,
                                storage=("storage.backend=file", f'storage.file_dirs=["{d}"]')
                                + HOST_HOLDS_ALL)
        self.check(figures, 2000)

    def test_a_corrupted_save_is_caught(self):
        figures = run_check("flash_attn", "shm", CURRENT, 200, prompt_blocks=8, prompts=40,
                            corrupt=True)
        show(figures)
        self.assertEqual(figures["corrupted_blocks"], 1)
        self.assertGreaterEqual(figures["mismatches"], 1)
        self.assertTrue(all("(position 2) layer 1 half 0: token 0 element 0" in m
                            for m in figures["first_mismatches"]), figures["first_mismatches"])

    def test_write_through_with_host_evictions(self):
        """A host tier smaller than the prompts. Host copies offered to a synchronous hit and
        evicted before its admission (by storage loads started first, as another engine's
        would) come back as load errors, which vLLM computes a step later: kvtier must save
        those blocks only after that step (docs/vllm.md, "The data path"). Without the early
        loads the connector admits its hits first: no load errors. Both layouts and
        generations."""
        for kind, gen in (("flash_attn", CURRENT), ("mla", V0_11_0)):
            with self.subTest(kind=kind):
                figures = run_check(kind, "shm", gen, MIN_BLOCKS, storage=MEMORY,
                                    evict_offered=True)
                self.check(figures, MIN_BLOCKS)
                self.assertGreater(figures["load_error_blocks"], 0)
        figures = run_check("flash_attn", "shm", CURRENT, MIN_BLOCKS // 4, storage=MEMORY)
        self.check(figures, MIN_BLOCKS // 4)
        self.assertEqual(figures["load_error_blocks"], 0)


if __name__ == "__main__":
    unittest.main()
