"""The suite's comparisons, one module each; ``ALL`` is the order ``python -m bench`` runs them.

Each module defines ``COMPARISON`` (``bench.harness.Comparison``).  Arm ``a`` is always
accelctl, arm ``b`` the baseline, so every ratio reads "accelctl / baseline" (for times:
below 1 is accelctl faster).
"""

from __future__ import annotations

from bench.comparisons import (bert_accelerate, bert_accelerate_ddp, bert_step, bert_step_fused, bert_worker_fused,
                               bloomz_e2e, cli_estimate, cli_plan, cli_validate, gen_static_cache, gpt2_step,
                               llama_fsdp, llama_tp, sweep_estimate, tui_attached, vit_compile, vit_compile_bare, vit_step,
                               zero2_step)

ALL = [cli_validate.COMPARISON, cli_validate.COMPARISON_IR,
       *(m.COMPARISON for m in (cli_plan, cli_estimate, vit_step, vit_compile, vit_compile_bare, bert_step,
                                bert_step_fused, bert_worker_fused, gpt2_step, bert_accelerate, bert_accelerate_ddp,
                                zero2_step, llama_fsdp, llama_tp, bloomz_e2e, gen_static_cache, tui_attached,
                                sweep_estimate))]
BY_NAME = {c.name: c for c in ALL}
