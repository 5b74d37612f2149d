"""Fixed host facts for tests that compare plans (``accelctl.contract.hostfacts``): a plan is
compiled for the host it is given, so a golden plan is the same on any machine that runs the
suite (AVX2-only or AVX-512, 2 cores or 64), with no masking.

``REFERENCE``: the golden plans' host, an AVX2-only CPU (no native bf16/fp16) with 2 cores and
16 GiB available, nothing calibrated.  ``AVX512_BF16``: a CPU with native bf16 (AVX512-BF16 and
AMX) and fp16 (AVX512-FP16), 8 cores, 64 GiB."""

from accelctl.contract.hostfacts import HostFacts

AVX2 = frozenset("fpu sse sse2 ssse3 sse4_1 sse4_2 avx avx2 fma f16c bmi1 bmi2".split())
REFERENCE = HostFacts(cores=2, cpu_model="reference AVX2 CPU", flags=AVX2, memory_bytes=16 * 2**30)
AVX512_BF16 = HostFacts(cores=8, cpu_model="reference AVX-512 CPU",
                        flags=AVX2 | {"avx512f", "avx512bw", "avx512_bf16", "amx_bf16", "avx512_fp16"},
                        memory_bytes=64 * 2**30)
