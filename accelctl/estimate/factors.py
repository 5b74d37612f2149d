"""Achievable fractions of the datasheet peaks, as data with their provenance.

None of these is fitted to a seed's published figure: they come from papers and vendors'
own measurements (or are marked ASSUMPTION), so the seeds' numbers in ``accelctl report
--reference`` are predictions, not fits.  ``accelctl estimate --calibrate RUN...`` replaces
them with factors fitted to the user's own recorded runs (``calibrate.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from accelctl.frozen import replace


@dataclass(frozen=True)
class Factor:
    value: float
    source: str


@dataclass(frozen=True)
class Factors:
    #: model FLOPs utilisation of large matrix products in training / batched inference
    mfu: Factor = Factor(0.50, "Narayanan et al., 'Efficient Large-Scale Language Model Training on GPU "
                               "Clusters Using Megatron-LM', SC'21: 52% of A100 peak sustained (2021-04)")
    #: fraction of peak memory bandwidth a streaming kernel reaches
    bandwidth: Factor = Factor(0.80, "BabelStream / STREAM triad on HBM GPUs: 80-90% of the datasheet figure "
                                     "(Deakin et al., 'Tracking performance portability on the Yellow Brick "
                                     "Road to exascale', P3HPC 2020)")
    #: fraction of link bandwidth a ring collective reaches (bus bandwidth / link bandwidth)
    link: Factor = Factor(0.80, "nccl-tests all_reduce_perf busbw on DGX A100 NVLink: ~230 of 300 GB/s "
                                "(NVIDIA nccl-tests PERFORMANCE.md, 2021)")
    #: fixed cost of one collective (latency term of the ring: alpha)
    collective_latency_s: Factor = Factor(20e-6, "nccl-tests: small-message all_reduce latency ~10-30 us "
                                                 "inside a node (NVIDIA nccl-tests, 2021)")
    #: host-side time per transformer layer per generated token in eager mode: the layer's
    #: PyTorch operators, each dispatched and launched on its own
    eager_layer_overhead_s: Factor = Factor(450e-6, "45 operators per decoder layer x 10 us each: transformers' "
                                                    "BloomBlock (modeling_bloom.py, 2022) at one token with a KV "
                                                    "cache, counted: 2 LayerNorms, 4 Linears, 30 in attention (head "
                                                    "split/merge reshapes, 2 KV cats with casts, baddbmm with alibi, "
                                                    "fp32 cast, scale, masked_fill, softmax, cast back, dropout, bmm, "
                                                    "dropout-add), 9-op tanh GELU, dropout-add; 10 us = CUDA launch "
                                                    "latency (NVIDIA CUDA C++ Best Practices Guide; PyTorch dispatch "
                                                    "is 5-25 us per op)")
    #: host-side time of one eager PyTorch operator on an accelerator (dispatch and kernel
    #: launch), what a run of small kernels waits for (Stable Diffusion's UNet: ~920 per call)
    eager_op_overhead_s: Factor = Factor(10e-6, "CUDA launch latency (NVIDIA CUDA C++ Best Practices Guide; PyTorch "
                                                "dispatch is 5-25 us per op): the 10 us per operator of "
                                                "eager_layer_overhead_s")
    #: the same under DeepSpeed-inference kernel injection (``kernel_inject = on``): the
    #: layer is DeepSpeedTransformerInference's fused ops, far fewer launches than eager
    fused_layer_overhead_s: Factor = Factor(160e-6, "16 launches per decoder layer x 10 us each: DeepSpeed-inference's "
                                                    "injected layer (DeepSpeedTransformerInference, deepspeed/ops/"
                                                    "transformer/inference, v0.7-0.8, 2022-23) at one token, counted: "
                                                    "qkv_gemm (LayerNorm, GEMM, bias: 3), softmax_context (bias-add "
                                                    "transform into the KV workspace, scores GEMM, softmax with alibi "
                                                    "and mask, context GEMM, transform back: 5), attention output "
                                                    "GEMM, mlp_gemm (residual + LayerNorm, GEMM, bias-GELU: 3), output "
                                                    "GEMM, bias-residual add, 2 tensor-parallel all-reduces; 10 us = "
                                                    "CUDA launch latency as for eager")
    #: host-side time of one transformer layer's forward or backward pass in a training step
    #: (the Python and dispatch of its ~30 operators); on an accelerator it overlaps with the
    #: device's work (launches are asynchronous) and bounds the step only when larger, on the
    #: host CPU it adds.  ``--calibrate`` fits it on the user's runs
    train_layer_overhead_s: Factor = Factor(100e-6, "ASSUMPTION: ~10 kernel launches x ~10 us per layer pass "
                                                    "(CUDA launch latency, NVIDIA CUDA C++ Best Practices Guide)")
    #: the same with the whole step captured as a graph (HPU graphs, CUDA graphs)
    graph_layer_overhead_s: Factor = Factor(10e-6, "ASSUMPTION: one graph replay per step; ~1/10 of eager")
    #: share of a training step's compute that is the backward pass (gradient all-reduce
    #: overlaps with it: PyTorch DDP buckets, DeepSpeed overlap_comm)
    backward_share: Factor = Factor(2 / 3, "backward = 2 x forward FLOPs (see flops.py)")

    def with_(self, **values: Factor) -> "Factors":
        return replace(self, **values)


DEFAULT = Factors()
