# Data-parallel training across 2 processes on this machine: torchrun with the gloo
# process group, one rank per core.  Checks the multi-process path (rendezvous,
# gradient all-reduce, per-rank events) without an accelerator.  No seed figures.

workload ddp_cpu {
  description = "2-rank DDP (gloo) on a tiny BERT, masked LM on synthetic tokens"
  task pretrain { objective = mlm }
  model bert(layers = 2, hidden = 64, heads = 4, vocab = 1000)
  dataset synthetic(seq_len = 64 tokens)
  optimizer adamw(lr = 0.001)
  precision fp32
  batch { micro = 4  accumulation = 1  global = 8 }         # 4 x 1 x 2 ranks
  measure { warmup = 2 steps  steps = 10 steps }

  target cpu {
    devices  = 2                       # two processes, one per core
    parallel = ddp
    threads  = 1
  }
}

# The same model and batch, data parallel through DeepSpeed ZeRO stage 2 (optimizer state
# and gradients partitioned over the 2 ranks), launched by the deepspeed launcher.
workload zero2_cpu {
  description = "2-rank DeepSpeed ZeRO-2 (gloo) on a tiny BERT, masked LM on synthetic tokens"
  task pretrain { objective = mlm }
  model bert(layers = 2, hidden = 64, heads = 4, vocab = 1000)
  dataset synthetic(seq_len = 64 tokens)
  optimizer adamw(lr = 0.001)
  precision fp32
  batch { micro = 4  accumulation = 1  global = 8 }
  measure { warmup = 2 steps  steps = 10 steps }

  target cpu {
    devices  = 2
    parallel = zero(stage = 2)
    threads  = 1
  }
}
