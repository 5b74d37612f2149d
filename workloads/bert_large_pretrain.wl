# BERT pre-training, phase 1, on Gaudi1, Gaudi2 and A100 80GB (seed 000:
# "Faster training and inference: Habana Gaudi2 vs NVIDIA A100 80GB", Optimum Habana).
# Each fact cites its seed line (shared/seeds/000_46826d03e7119840.txt, "000:N");
# tests/language/seed_facts.txt keeps the same facts, tests/language/test_seed_workloads.py checks
# this file against them.  (The file and workload names are kept: tests, docs and stored
# runs refer to them.  The model is the one the seed's run trained: BERT-base.)
#
# The run (000:29): Philipp Schmid's Optimum Habana pre-training, per-device batch 32
# (global 8 x 32 = 256), 65,000 steps, 8 h 53 min on Gaudi1; the same script and
# hyperparameters on Gaudi2: 2 h 55 min, x3.04 (000:30).  Per-device batch 64 (global
# 512): 20,000 steps reach the same loss, 1 h 33 min, throughput x1.16 (000:31).  Gaudi2:
# 1580.2 samples/s at bs 32, 1835.8 at bs 64 (000:32).  8 devices, distributed; bf16/fp32
# mixed precision on Gaudi, fp16 on A100 (000:34).
#
# What the seed leaves open, from the run it cites (000:29; huggingface/blog
# pretraining-bert.md, P. Schmid, 2022-08: the tutorial whose run seed 000 repeats):
#   * model: BERT-base pre-trained from scratch -- model_config_id bert-base-uncased, so
#     random initial weights from that configuration (a pretrain task never loads the
#     Hub's trained weights), with the vocabulary of his own tokenizer: 32,000 tokens
#     (train_new_from_iterator(vocab_size=32_000)).
#   * tokenizer and data: that tokenizer (philschmid/bert-base-uncased-2022-habana) over
#     Wikipedia 20220301.en + BookCorpus, concatenated and cut into chunks of 512 tokens
#     (tokenizer.model_max_length), pushed pre-tokenized as philschmid/processed_bert_dataset.
#     The language names no tokenizer and the worker tokenizes text itself, so synthetic
#     token ids of the same shape here: 512 tokens drawn from the 32,000-token vocabulary,
#     15% masked (DataCollatorForLanguageModeling's mlm_probability, run_mlm.py).
#   * optimizer and schedule: the Trainer's defaults with learning_rate 5e-5 -- AdamW
#     (GaudiTrainer: Habana's FusedAdamW), weight decay 0, gradient-norm clipping 1.0
#     (max_grad_norm), linear decay without warm-up.  The language has no learning-rate
#     schedule yet: the measured steps run at 5e-5 (throughput does not depend on it).
#     The bs 64 run is the same script (000:31 names only the batch and the steps), so
#     the same learning rate.
#   * loader: the Trainer's defaults, no worker processes (dataloader_num_workers 0).
#   * what is timed: the published throughput is the Trainer's over the whole run; 5
#     warm-up (graph compilation) and 20 counted steps here.
# The A100 figures of the same table (981.6 samples/s at bs 32, 1082.6 at bs 64) are in
# the original post's table only (an image in the seed, 000:33-34).
# The two batch sizes are two workloads because the step count of the real job
# (train_steps, used for the projected time and cost) differs.

workload bert_large_phase1_bs32 {
  description = "BERT-base pre-training from scratch, 512 tokens, per-device batch 32, global 256, 65,000 steps (seed 000)"
  task pretrain {
    objective   = mlm
    train_steps = 65000 steps          # 000:29
  }
  model hf("bert-base-uncased") {      # model_config_id bert-base-uncased: its configuration, random weights
    shape    = bert(layers = 12, hidden = 768, heads = 12, ffn = 3072, vocab = 32000, max_positions = 512)
    stand_in = bert(layers = 2, hidden = 64, heads = 4)
  }
  dataset synthetic(seq_len = 512 tokens, mlm_probability = 0.15)   # 512-token chunks, 32k vocabulary
  optimizer adamw(lr = 0.00005, grad_clip = 1.0)   # learning_rate 5e-5, the Trainer's max_grad_norm 1.0
  precision bf16                       # 000:34: bf16/fp32 mixed precision on Gaudi
  batch { micro = 32  accumulation = 1  global = 256 }      # 000:29: 32 x 8 = 256
  measure { warmup = 5 steps  steps = 20 steps }

  target gaudi1 {                      # 000:29: 8 h 53 min for 65,000 steps
    instance           = dl1.24xlarge  # 8 x Gaudi1 32 GB, 13.11 usd/h
    devices            = 8
    parallel           = ddp
    dataloader_workers = 0
  }
  target gaudi2 {                      # 000:30, 000:32: 2 h 55 min, 1580.2 samples/s
    device             = gaudi2
    instance           = gaudi2-hls
    devices            = 8
    parallel           = ddp
    dataloader_workers = 0
  }
  target a100 {                        # A100 80GB, fp16 (000:34); 981.6 samples/s in the original table
    device             = a100
    devices            = 8
    parallel           = ddp
    precision          = fp16
    dataloader_workers = 0
  }
  target cpu {
    devices   = 1
    precision = fp32
    threads   = 1
    batch { micro = 4  global = 4 }
  }
}

workload bert_large_phase1_bs64 {
  description = "BERT-base pre-training from scratch, 512 tokens, per-device batch 64, global 512, 20,000 steps (seed 000)"
  task pretrain {
    objective   = mlm
    train_steps = 20000 steps          # 000:31
  }
  model hf("bert-base-uncased") {
    shape    = bert(layers = 12, hidden = 768, heads = 12, ffn = 3072, vocab = 32000, max_positions = 512)
    stand_in = bert(layers = 2, hidden = 64, heads = 4)
  }
  dataset synthetic(seq_len = 512 tokens, mlm_probability = 0.15)
  optimizer adamw(lr = 0.00005, grad_clip = 1.0)   # the same script and learning rate as bs 32
  precision bf16
  batch { micro = 64  accumulation = 1  global = 512 }      # 000:31: 64 x 8 = 512
  measure { warmup = 5 steps  steps = 20 steps }

  target gaudi1 {                      # no figure: bs 64 is Gaudi2's 96 GB (000:31)
    instance           = dl1.24xlarge
    devices            = 8
    parallel           = ddp
    dataloader_workers = 0
  }
  target gaudi2 {                      # 000:31-32: 1 h 33 min, 1835.8 samples/s
    device             = gaudi2
    instance           = gaudi2-hls
    devices            = 8
    parallel           = ddp
    dataloader_workers = 0
  }
  target a100 {                        # 1082.6 samples/s in the original table
    device             = a100
    devices            = 8
    parallel           = ddp
    precision          = fp16
    dataloader_workers = 0
  }
  target cpu {
    devices   = 1
    precision = fp32
    threads   = 1
    batch { micro = 4  global = 4 }
  }
}
