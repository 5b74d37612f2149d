"""The same BERT, 2 ranks of DeepSpeed ZeRO-2 (gloo): ``accelctl run`` vs a bare
``deepspeed.initialize`` script under torchrun.  Both arms use both ranks' cores, so the
pairs are interleaved, never pinned."""

from bench.comparisons._train import torchrun, train_setup
from bench.comparisons.bert_step import ARCH, SHAPE
from bench.harness import Comparison


def _setup(quick, workdir):
    return train_setup(quick, workdir, "bert_zero2.wl", "ds_zero2.py", SHAPE,
                       "bare deepspeed.initialize ZeRO-2, 2 ranks (bench/baselines/ds_zero2.py)", ARCH,
                       launcher=torchrun(2), env_extra={"DS_ACCELERATOR": "cpu"}, pinnable=False)


COMPARISON = Comparison(name="zero2_step", title="BERT ZeRO-2, 2 ranks vs bare deepspeed.initialize",
                        setup=_setup, pairs=4, quick_pairs=2)
