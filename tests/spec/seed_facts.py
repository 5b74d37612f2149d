"""The seeds' facts, one row each, with the line of the seed (``shared/seeds/NNN_*.txt``)
or the source the seed names that states it: what ``workloads/`` must say.

``where`` is a dotted path read from the workload (``task.max_new_tokens``,
``model.real_shape.layers``), from one of its targets (``target.batch.micro``; ``measure``
and ``optimizer`` resolve to the target's own block where it has one), or from the
target's plan (``plan.job.model.weights``).  ``tests/spec/test_seed_workloads.py`` checks
every row against the shipped files.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class Fact(NamedTuple):
    seed: str
    #: the seed line ("000:29"), or the source the seed names for a fact it leaves open
    line: str
    file: str
    workload: str
    #: targets the fact holds for ("" : the workload itself)
    targets: tuple[str, ...]
    where: str
    value: Any


def _facts(seed, file, workload, rows):
    return [Fact(seed, line, file, workload, tuple(targets.split()) if targets else (), where, value)
            for line, targets, where, value in rows]


#: the tutorial seed 000's BERT run repeats (000:29 cites it): huggingface/blog pretraining-bert.md
SCHMID = "000:29 -> huggingface/blog pretraining-bert.md"
#: the original post seed 000 translates (its tables are images in the seed)
ORIGINAL_SD = "000:41 -> huggingface/blog habana-gaudi-2-benchmark.md (SD table: A100 (BS=1), Latency (s/img))"
ORIGINAL_T5 = "000:45 -> huggingface/blog habana-gaudi-2-benchmark.md (T5 table: A100 (BS=16), 8.07 samples/s)"
#: the reference seed 001 names (001:19): HabanaAI/Model-References deepspeed-bert
HABANA_REF = "001:19 -> Model-References deepspeed-bert run_bert_1.5b_8x.sh / deepspeed_config_bert_1.5b.json"
#: the GPU scripts seed 003 links for its A100 figures
BLOOM_GPU = "003:62 -> huggingface/transformers-bloom-inference bloom-ds-inference.py"

_BERT = "bert_large_pretrain.wl"
_G = "gaudi1 gaudi2 a100"
SEED_000 = [
    *_facts("000", _BERT, "bert_large_phase1_bs32", [
        ("000:29", "", "task.kind", "pretrain"),
        ("000:29", "", "task.objective", "mlm"),
        ("000:29", "", "task.train_steps", 65000),
        ("000:29", _G, "target.batch.micro", 32),
        ("000:29", _G, "target.batch.global_size", 256),
        ("000:29", _G, "target.devices", 8),
        ("000:34", _G, "target.parallel.strategy", "data"),
        ("000:34", "gaudi1 gaudi2", "target.precision.dtype", "bf16"),
        ("000:34", "a100", "target.precision.dtype", "fp16"),
        ("000:29", "gaudi1", "target.instance", "dl1.24xlarge"),
        ("000:30", "gaudi2", "target.device", "gaudi2"),
        ("000:34", "a100", "target.device", "a100"),
        (SCHMID, "", "model.ref", "bert-base-uncased"),
        (SCHMID, "", "model.real_shape.layers", 12),
        (SCHMID, "", "model.real_shape.hidden", 768),
        (SCHMID, "", "model.real_shape.heads", 12),
        (SCHMID, "", "model.real_shape.vocab", 32000),
        (SCHMID, "", "dataset.seq_len", 512),
        (SCHMID, "", "dataset.mlm_probability", 0.15),
        (SCHMID, _G, "optimizer.name", "adamw"),
        (SCHMID, _G, "optimizer.lr", 5e-5),
        (SCHMID, _G, "optimizer.grad_clip", 1.0),
        (SCHMID, _G, "optimizer.weight_decay", 0.0),
        (SCHMID, _G, "target.options.dataloader_workers", 0),
        (SCHMID, "gaudi1 gaudi2 a100", "plan.job.model.weights", "random"),
    ]),
    *_facts("000", _BERT, "bert_large_phase1_bs64", [
        ("000:31", "", "task.train_steps", 20000),
        ("000:31", "gaudi2 a100", "target.batch.micro", 64),
        ("000:31", "gaudi2 a100", "target.batch.global_size", 512),
        ("000:31", "gaudi2", "target.devices", 8),
        (SCHMID, "", "model.real_shape.vocab", 32000),
        (SCHMID, "", "dataset.seq_len", 512),
        (SCHMID, "gaudi2", "optimizer.lr", 5e-5),
        (SCHMID, "gaudi2 a100", "plan.job.model.weights", "random"),
    ]),
    *_facts("000", "stable_diffusion.wl", "stable_diffusion", [
        ("000:37", "gaudi1 gaudi2", "target.batch.micro", 8),
        (ORIGINAL_SD, "a100", "target.batch.micro", 1),
        ("000:41", "gaudi1 gaudi2 a100", "target.devices", 1),
        ("000:41", "gaudi1 gaudi2", "target.precision.dtype", "bf16"),
        ("000:41", "a100", "target.precision.dtype", "fp16"),
        ("000:36", "gaudi1 gaudi2 a100", "measure.warmup", 2),
        ("000:36", "", "task.kind", "infer"),
    ]),
    *_facts("000", "t5_3b_summarization.wl", "t5_3b_summarization", [
        ("000:43", "", "model.ref", "t5-3b"),
        ("000:43", "", "task.kind", "finetune"),
        ("000:43", "", "dataset.ref", "cnn_dailymail"),
        ("000:45", "gaudi2 a100", "target.precision.dtype", "fp32"),
        ("000:45", "gaudi2 a100", "target.gradient_checkpointing", True),
        ("000:45", "gaudi2 a100", "target.devices", 8),
        ("000:44", "gaudi2", "target.batch.micro", 1),
        (ORIGINAL_T5, "a100", "target.batch.micro", 16),
        ("000:43", "gaudi1", "target.instance", "dl1.24xlarge"),
    ]),
]

_B15 = "bert_1_5b_zero1.wl"
SEED_001 = [
    *_facts("001", _B15, "bert_1_5b_zero1_8n", [
        ("001:19", "", "model.real_shape.layers", 48),
        ("001:19", "", "model.real_shape.hidden", 1600),
        ("001:19", "", "model.real_shape.heads", 25),
        ("001:15", "", "task.kind", "pretrain"),
        ("001:37", "dl1_1n dl1_8n", "target.batch.micro", 16),
        ("001:37", "dl1_1n dl1_8n", "target.batch.accumulation", 24),
        ("001:37", "dl1_8n", "optimizer.lr", 0.0015),
        ("001:7", "dl1_1n dl1_8n", "target.parallel.strategy", "zero"),
        ("001:7", "dl1_1n dl1_8n", "target.parallel.zero_stage", 1),
        ("001:17", "dl1_1n dl1_8n", "target.precision.dtype", "bf16"),
        ("001:11", "dl1_1n dl1_8n", "target.instance", "dl1.24xlarge"),
        ("001:11", "dl1_1n dl1_8n", "target.devices", 8),
        ("001:42", "dl1_1n", "target.nodes", 1),
        ("001:43", "dl1_8n", "target.nodes", 8),
        ("001:13", "dl1_1n dl1_8n", "target.engine", "aws_batch"),
        ("001:11", "", "engines.aws_batch.settings.efa", True),
        (HABANA_REF, "dl1_1n dl1_8n", "optimizer.name", "lamb"),
        (HABANA_REF, "dl1_1n dl1_8n", "optimizer.grad_clip", 1.0),
        (HABANA_REF, "", "dataset.seq_len", 128),
        (HABANA_REF, "", "dataset.mlm_probability", 0.15),
        ("001:19", "dl1_1n dl1_8n", "plan.job.model.weights", "random"),
    ]),
    *_facts("001", _B15, "bert_1_5b_zero1_16n", [
        ("001:37", "dl1_16n", "optimizer.lr", 0.003),
        ("001:44", "dl1_16n", "target.nodes", 16),
        ("001:37", "dl1_16n", "target.batch.micro", 16),
        ("001:37", "dl1_16n", "target.batch.accumulation", 24),
        ("001:37", "dl1_16n", "target.batch.global_size", 16 * 24 * 128),
        ("001:7", "dl1_16n", "target.parallel.zero_stage", 1),
        (HABANA_REF, "dl1_16n", "optimizer.name", "lamb"),
        (HABANA_REF, "dl1_16n", "optimizer.grad_clip", 1.0),
    ]),
    *_facts("001", "bert_large_scaling.wl", "bert_large_scaling", [
        ("001:19", "", "model.real_shape.layers", 24),
        ("001:19", "", "model.real_shape.hidden", 1024),
        ("001:19", "", "model.real_shape.heads", 16),
        ("001:30", "dl1_1n", "target.nodes", 1),
        ("001:31", "dl1_2n", "target.nodes", 2),
        ("001:32", "dl1_4n", "target.nodes", 4),
        ("001:33", "dl1_8n", "target.nodes", 8),
        ("001:29", "dl1_1n dl1_2n dl1_4n dl1_8n", "target.devices", 8),
        ("001:7", "dl1_1n dl1_8n", "target.parallel.zero_stage", 1),
        ("001:17", "dl1_1n", "target.precision.dtype", "bf16"),
        ("001:19", "dl1_1n dl1_8n", "plan.job.model.weights", "random"),
    ]),
]

_VIT = "p4d p4d_te p5_bf16_b64 p5_te_b64 p5_fp8_b64 p5_bf16 p5_te p5_fp8"
SEED_002 = _facts("002", "vit_fp8.wl", "vit_huge_fp8", [
    ("002:31", "", "model.real_shape.hidden", 1280),
    ("002:31", "", "model.real_shape.layers", 32),
    ("002:31", "", "model.real_shape.heads", 16),
    ("002:29", "", "model.real_shape.patch", 16),            # timm's default patch_size
    ("002:29", "", "model.real_shape.image_size", 224),
    ("002:31", "", "model.real_shape.classes", 1000),
    ("002:31", "", "dataset.image_size", 224),
    ("002:31", "", "dataset.classes", 1000),
    ("002:31", _VIT, "optimizer.name", "sgd"),
    ("002:31", _VIT, "optimizer.lr", 0.001),
    ("002:31", _VIT, "optimizer.momentum", 0.9),
    ("002:31", "p4d p4d_te p5_bf16_b64 p5_te_b64 p5_bf16 p5_te", "target.precision.dtype", "bf16"),
    ("002:96", "p5_fp8 p5_fp8_b64", "target.precision.dtype", "fp8"),
    ("002:31", "p4d p4d_te p5_bf16_b64 p5_te_b64 p5_fp8_b64", "target.batch.micro", 64),
    ("002:104", "p5_bf16 p5_te p5_fp8", "target.batch.micro", 128),
    ("002:31", _VIT, "target.devices", 8),
    ("002:31", _VIT, "target.parallel.strategy", "data"),
    ("002:31", _VIT, "target.options.dataloader_workers", 12),
    ("002:31", _VIT, "target.options.pin_memory", True),
    ("002:31", _VIT, "measure.warmup", 11),
    ("002:31", _VIT, "measure.steps", 41),
    ("002:25", "p4d p4d_te", "target.instance", "p4d.24xlarge"),
    ("002:23", "p5_bf16 p5_te p5_fp8 p5_bf16_b64", "target.instance", "p5.48xlarge"),
    ("002:23", "p5_bf16 p5_te p5_fp8 p5_bf16_b64 p5_fp8_b64", "target.price_per_hour", 98.32),
    ("002:35", "p4d p4d_te", "target.price_per_hour", 32.77),
    ("002:91", "p4d_te p5_te p5_fp8 p5_te_b64 p5_fp8_b64", "target.options.te_layers", True),
    ("002:31", "p4d p5_bf16", "plan.job.model.weights", "random"),
])

_BLOOM_TASK = [
    ("003:19", "", "task.prompt", "DeepSpeed is a machine learning framework"),
    ("003:18", "", "task.max_new_tokens", 100),
    ("003:18", "", "task.decoding", "greedy"),
    ("003:18", "", "task.kv_cache", True),
]
SEED_003 = [
    *_facts("003", "bloomz.wl", "bloomz_176b", [
        *_BLOOM_TASK,
        ("003:23", "", "model.ref", "bigscience/bloomz"),
        ("003:17", "gaudi2 a100", "target.batch.micro", 1),
        ("003:18", "gaudi2 a100", "target.devices", 8),
        ("003:18", "gaudi2 a100", "target.parallel.strategy", "deepspeed_inference"),
        ("003:18", "gaudi2 a100", "target.parallel.tp", 8),
        ("003:18", "gaudi2", "target.options.hpu_graphs", True),
        ("003:18", "gaudi2", "target.precision.dtype", "bf16"),
        (BLOOM_GPU, "a100", "target.precision.dtype", "fp16"),
        (BLOOM_GPU, "a100", "target.parallel.kernel_inject", True),
        ("003:57", "gaudi2_example", "target.options.script", "example"),
    ]),
    *_facts("003", "bloomz.wl", "bloomz_7b", [
        *_BLOOM_TASK,
        ("003:24", "", "model.ref", "bigscience/bloomz-7b1"),
        ("003:24", "gaudi2_8x a100_8x gaudi1_8x", "target.devices", 8),
        ("003:24", "gaudi2_8x a100_8x gaudi1_8x", "target.parallel.tp", 8),
        ("003:25", "gaudi2_1x a100_1x gaudi1_1x", "target.devices", 1),
        ("003:27", "gaudi1_8x", "target.instance", "dl1.24xlarge"),
        ("003:18", "gaudi2_8x gaudi1_8x gaudi2_1x gaudi1_1x", "target.options.hpu_graphs", True),
        (BLOOM_GPU, "a100_8x a100_1x", "target.precision.dtype", "fp16"),
        (BLOOM_GPU, "a100_8x a100_1x", "target.parallel.kernel_inject", True),
    ]),
]

_NEURON = "trn1_2xlarge trn1_32xlarge inf2_xlarge inf2_8xlarge inf2_24xlarge inf2_48xlarge"
SEED_004 = _facts("004", "vit_neuron.wl", "vit_neuron", [
    ("004:29", "", "model.real_shape.layers", 12),           # timm VisionTransformer() defaults
    ("004:29", "", "model.real_shape.hidden", 768),
    ("004:29", "", "model.real_shape.heads", 12),
    ("004:29", "", "model.real_shape.patch", 16),
    ("004:29", "", "model.real_shape.image_size", 224),
    ("004:29", "", "model.real_shape.classes", 1000),
    ("004:29", "", "seed", 0),                               # torch.manual_seed(0)
    ("004:29", _NEURON, "target.batch.micro", 16),
    ("004:29", _NEURON, "optimizer.name", "adam"),
    ("004:29", _NEURON, "optimizer.lr", 0.001),
    ("004:29", _NEURON, "target.precision.dtype", "bf16"),
    ("004:29", _NEURON, "measure.warmup", 10),
    ("004:29", _NEURON, "measure.steps", 491),
    ("004:29", "trn1_2xlarge trn1_32xlarge", "target.options.dataloader_workers", 4),
    ("004:29", "inf2_xlarge", "target.options.dataloader_workers", 2),
    ("004:29", "inf2_24xlarge inf2_48xlarge", "target.options.dataloader_workers", 8),
    ("004:13", "trn1_2xlarge", "target.instance", "trn1.2xlarge"),
    ("004:13", "trn1_32xlarge", "target.instance", "trn1.32xlarge"),
    ("004:13", "inf2_xlarge", "target.instance", "inf2.xlarge"),
    ("004:13", "inf2_8xlarge", "target.instance", "inf2.8xlarge"),
    ("004:13", "inf2_24xlarge", "target.instance", "inf2.24xlarge"),
    ("004:13", "inf2_48xlarge", "target.instance", "inf2.48xlarge"),
])

SEED_FACTS = {"000": SEED_000, "001": SEED_001, "002": SEED_002, "003": SEED_003, "004": SEED_004}
