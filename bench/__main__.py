"""``python -m bench``: every side-by-side comparison of accelctl against a bare baseline.

    .venv/bin/python -m bench --pin                 # the full suite, single-process pairs pinned
    .venv/bin/python -m bench --quick               # tiny sizes, few pairs: a smoke test, not a measurement
    .venv/bin/python -m bench --only bert_step --pin --json out.json
    .venv/bin/python -m bench --write-readme        # run, then rewrite docs/bench.md's bench table
    .venv/bin/python -m bench --readme-only         # rewrite the table from bench/last_run.json

A run of the whole suite (no ``--only``) is saved as ``bench/last_run.json``; docs/bench.md's
table is generated from it.

Each comparison runs as A/B pairs (``bench.harness``): accelctl (a) against a baseline (b),
fresh processes each time.  Printed per comparison and metric: median ratio a / b, spread
(min–max), n, a bootstrap 95 % interval, and a verdict only where the interval supports one.
The accelctl arms also report where the time to their first measured step went.

Duration: the whole suite (16 comparisons) ran in 816 s with ``--pin`` on the quiet 2-core lab
machine (2026-11-23); interleaved, the single-process pairs take about twice as long.  The
interleaved two-rank pairs (ZeRO-2 ~36 s, DDP vs Accelerate ~25 s each) dominate.  FSDP2 and
tensor parallel on 2 ranks (``llama_fsdp``, ``llama_tp``) came after that run; their ``--quick``
run took 579 s together at load 8-14 (docs/bench.md).

The Accelerate comparisons (1 and 2 ranks) need the ``bench`` extra, which the test setup
does not install:
    .venv/bin/pip install -e '.[bench]' -c scripts/constraints.txt
Without it they are reported "not run: accelerate not installed".
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

from bench import readme
from bench.comparisons import ALL, BY_NAME
from bench.harness import ROOT, median_parts, run_pairs, same_model, summarize, usable_cores
from bench.hostfacts import host

LAST_RUN = Path(__file__).resolve().parent / "last_run.json"
BENCH_DOC = ROOT / "docs" / "bench.md"


def run_one(comp, args, workdir: Path) -> dict:
    out = {"name": comp.name, "title": comp.title}
    reason = comp.unavailable()
    if reason:
        out["status"] = f"not run: {reason}"
        print(f"== {comp.name}: {out['status']}", flush=True)
        return out
    n = args.pairs or (comp.quick_pairs if args.quick else comp.pairs)
    sub = workdir / comp.name
    sub.mkdir()
    setup = comp.setup(args.quick, sub)
    pinned = args.pin and setup.pinnable and len(usable_cores()) >= 2
    print(f"== {comp.name}: {setup.a_label}  vs  {setup.b_label}  ({n} pairs, "
          f"{'pinned' if pinned else 'interleaved'})", flush=True)
    t0 = time.perf_counter()
    try:
        log = run_pairs(setup, n, args.pin, progress=lambda s: print("   " + s, flush=True))
    except Exception as exc:  # noqa: BLE001 - one broken comparison does not end the suite
        out["status"] = f"failed: {type(exc).__name__}: {str(exc).strip().splitlines()[0][:200]}"
        out["error"] = traceback.format_exc()
        print(f"   {out['status']}\n{exc}", flush=True)
        return out
    finally:
        setup.cleanup()
    out.update(status="ok", a=setup.a_label, b=setup.b_label, mode="pinned" if pinned else "interleaved",
               wall_s=time.perf_counter() - t0,
               metrics={m: summarize(log, m) for m in setup.metrics}, metric_help=setup.metrics,
               accelctl_startup_s=median_parts(log.a, "start_"),
               accelctl_last_step_to_exit_s=median_parts(log.a, "end_").get("last_step_to_exit"),
               same_model=same_model(log), raw={"a": log.a, "b": log.b, "order": log.order, "cores": log.cores})
    for m, s in out["metrics"].items():
        if s is None:
            continue
        ci = f"95% CI [{s['ci95'][0]:.3f}, {s['ci95'][1]:.3f}]" if s["ci95"] else "no interval (n < 3)"
        print(f"   {m}: ratio {s['ratio_median']:.3f} ({s['ratio_min']:.3f}–{s['ratio_max']:.3f}, n={s['n']}), {ci}"
              f"{' -> ' + s['verdict'] if s['verdict'] else ''}   [a {s['a_median']:.4g} s, b {s['b_median']:.4g} s]",
              flush=True)
    if out["same_model"]:
        print("   same model, every pair: " + ", ".join(f"{k.replace('_', ' ')} {'yes' if v else 'NO'}"
                                                    for k, v in out["same_model"].items()), flush=True)
    if out["accelctl_startup_s"]:
        parts = ", ".join(f"{k} {v:.2f}" for k, v in out["accelctl_startup_s"].items())
        print(f"   accelctl run -> first measured step (s, median): {parts}; last step -> exit "
              f"{out['accelctl_last_step_to_exit_s'] or 0:.2f}", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny sizes, few pairs (a smoke test for CI)")
    ap.add_argument("--only", action="append", choices=sorted(BY_NAME), metavar="NAME",
                    help=f"run only this comparison (repeatable): {', '.join(BY_NAME)}")
    ap.add_argument("--pairs", type=int, help="pairs per comparison (default: each comparison's own)")
    ap.add_argument("--pin", action="store_true",
                    help="single-process comparisons: both arms at once, one core each, cores swapped each pair")
    ap.add_argument("--json", type=Path, metavar="OUT", help="also write the report here")
    ap.add_argument("--write-readme", action="store_true", help="after the run, rewrite docs/bench.md's table")
    ap.add_argument("--readme-only", action="store_true", help="rewrite docs/bench.md's table from bench/last_run.json")
    args = ap.parse_args(argv)

    if args.readme_only:
        readme.write(BENCH_DOC, json.loads(LAST_RUN.read_text()))
        print(f"docs/bench.md: bench table rewritten from {LAST_RUN.relative_to(ROOT)}")
        return 0
    chosen = [BY_NAME[n] for n in args.only] if args.only else ALL
    report = {"command": " ".join(["python -m bench", *(argv if argv is not None else sys.argv[1:])]),
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "quick": args.quick, "pin": args.pin,
              "host": host(), "comparisons": []}
    h = report["host"]
    print(f"bench: {h['cpu_model']}, {h['cores']} cores, flags {' '.join(h['cpu_flags'])}; "
          f"load average {h['loadavg_start'][0]:.2f}", flush=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="accelctl-bench-") as tmp:
        for comp in chosen:
            report["comparisons"].append(run_one(comp, args, Path(tmp)))
    report["wall_s"] = time.perf_counter() - t0
    report["host"]["loadavg_end"] = list(os.getloadavg())
    text = json.dumps(report, indent=2)
    if not args.only:  # the README table comes from the last run of the whole suite
        LAST_RUN.write_text(text)
    if args.json:
        args.json.write_text(text)
    if args.write_readme:
        readme.write(BENCH_DOC, report)
        print("docs/bench.md: bench table rewritten")
    print(f"bench: {len(chosen)} comparison(s) in {report['wall_s']:.0f} s; load average now "
          f"{os.getloadavg()[0]:.2f}", flush=True)
    return 0 if all(not c["status"].startswith("failed") for c in report["comparisons"]) else 1


if __name__ == "__main__":
    sys.exit(main())
