"""The connector's real data path on the CPU (``kvtier serve --backend shm``), end to end: vLLM's
stand-in (vllm_harness.py) keeps its KV tensors in shared memory and its forward writes real KV
bytes into them (real_kv.py: a function of each token's prefix, the layer and the half); the
worker attaches them; kvtier saves the blocks vLLM computed to its host tier and to storage,
evicts them, and loads them back into other block ids of vLLM's; every loaded block is compared
byte for byte with the KV of its content. FlashAttention's and MLA's layouts over >= 10,000
loaded blocks each, FlashInfer's over fewer; a save corrupted on purpose must be caught. The
harness's contract checks run at every step too. About a minute."""

import json
import os
import sys
import unittest

from real_kv import run_check
from vllm_harness import CURRENT, V0_11_0

MIN_BLOCKS = int(os.environ.get("KVTIER_REAL_KV_BLOCKS", "10000"))


def show(figures):
    print(json.dumps(figures, indent=1), file=sys.stderr)


class RealDataPathOnTheCpu(unittest.TestCase):
    def check(self, figures, min_blocks):
        show(figures)
        self.assertEqual(figures["mismatches"], 0, figures["first_mismatches"])
        self.assertGreaterEqual(figures["blocks_checked"], min_blocks)
        self.assertEqual(figures["server_exit"], 0)
        # Every layer of a synchronous load was waited for on its own (layer by layer).
        self.assertEqual(sorted(figures["layer_wait_us"]),
                         [str(l) for l in range(figures["layers"])])

    def test_flash_attention_layout_current_vllm(self):
        self.check(run_check("flash_attn", "shm", CURRENT, MIN_BLOCKS), MIN_BLOCKS)

    def test_mla_latent_layout_vllm_0_11(self):
        self.check(run_check("mla", "shm", V0_11_0, MIN_BLOCKS), MIN_BLOCKS)

    def test_flashinfer_layout_through_file_storage(self):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            figures = run_check("flashinfer", "shm", CURRENT, 2000, prompts=24,
                                storage=("storage.backend=file",
                                         f'storage.file_dirs=["{d}"]'))
        self.check(figures, 2000)

    def test_a_corrupted_save_is_caught(self):
        figures = run_check("flash_attn", "shm", CURRENT, 200, prompt_blocks=8, prompts=40,
                            corrupt=True)
        show(figures)
        self.assertEqual(figures["corrupted_blocks"], 1)
        self.assertGreaterEqual(figures["mismatches"], 1)
        self.assertTrue(all("(position 2) layer 1 half 0: token 0 element 0" in m
                            for m in figures["first_mismatches"]), figures["first_mismatches"])


if __name__ == "__main__":
    unittest.main()
