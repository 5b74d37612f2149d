"""Verbs that turn the estimate into a decision: ``pick`` and ``fit`` (``sweep --over`` is in
``sweep_cli``).

    accelctl pick FILE --work 'N samples|tokens|steps' [--deadline '12 h'] [--budget '500 usd']
    accelctl fit FILE -t T [--probe]

Nothing heavy at module level; ``pick`` and ``fit`` without ``--probe`` import no torch.
"""

from __future__ import annotations

from accelctl import exitcodes
from accelctl.errors import AccelctlError


def cmd_pick(args) -> int:
    from accelctl.api import estimate_calibrations
    from accelctl.contract.hostfacts import HostFacts
    from accelctl.estimate import work as W
    from accelctl.cli.tables import emit
    from accelctl.decide.pick import NODES, pick, row_dict, table

    W.parse_work(args.work)  # a bad --work is refused before anything is estimated
    deadline = W.parse_hours(args.deadline) if args.deadline else None
    budget = W.parse_usd(args.budget) if args.budget else None
    nodes = _counts(args.nodes) if args.nodes else NODES
    p = pick(args.file, args.work, deadline, budget, args.workload, nodes, args.top,
             estimate_calibrations(args.runs_dir), host=HostFacts.here())
    reply = getattr(args, "reply", None)
    emit([table(p)], args.format, args.output, reply, wide=args.wide,
          picks=[row_dict(i + 1, r) for i, r in enumerate(p.ranked)],
          unpriced=[row_dict(None, r) for r in p.unpriced], left_out=p.counts, rule=p.rule,
          assumptions=p.assumptions)
    if not p.ranked:
        msg = "no candidate meets " + " and ".join(x for x in (args.deadline and f"the deadline {args.deadline}",
                                                                args.budget and f"the budget {args.budget}") if x)
        if reply is not None:
            reply.fail("NoCandidate", msg)
        import sys

        print(f"accelctl pick: {msg}" if (args.deadline or args.budget) else "accelctl pick: no priced candidate",
              file=sys.stderr)
        return exitcodes.FAILED
    return exitcodes.OK


def _counts(text: str) -> tuple[int, ...]:
    from accelctl.decide.sweep import parse_counts

    try:
        return tuple(parse_counts(text))
    except ValueError as exc:
        raise AccelctlError(str(exc), exit_code=exitcodes.USAGE) from None


def add_pick(sub) -> None:
    from accelctl.cli.tables import table_options

    p = sub.add_parser("pick")
    p.add_argument("file")
    p.add_argument("--work", required=True, metavar="'N samples|tokens|steps'",
                   help="the job, the same on every candidate: e.g. '5e8 samples', '2e11 tokens', '20000 steps' "
                        "(steps at the workload's reference global batch)")
    p.add_argument("--deadline", metavar="'12 h'", help="keep the candidates done by then; cheapest first")
    p.add_argument("--budget", metavar="'500 usd'", help="keep the candidates within it; fastest first "
                                                         "(with --deadline: cheapest first)")
    p.add_argument("--nodes", help="node counts to consider (default 1,2,4,8,16)")
    p.add_argument("--top", type=int, default=10, help="rows shown (default 10)")
    p.add_argument("--workload", "-w")
    table_options(p)
    p.set_defaults(fn=cmd_pick)


def cmd_fit(args) -> int:
    import sys

    from accelctl.api import load_selected, named_target
    from accelctl.contract.hostfacts import HostFacts
    from accelctl.decide.fit import fit, lines

    spec = load_selected(args.file, args.workload)[0]
    target = named_target(spec, args.target)
    host = HostFacts.here()  # every plan of the verb is this machine's
    vs = fit(spec, target, host)
    reply = getattr(args, "reply", None)
    probe = None
    if args.probe:
        from accelctl.decide.fit_probe import probe_fit

        probe = probe_fit(args.file, spec, target, vs[0].micro, runs_root=args.runs_dir)
    if reply is not None:
        reply.result = {"workload": spec.name, "target": target.name, "capacity_bytes": target.memory_bytes,
                        "variants": [{"name": v.name, "largest_micro": None if v.refused else v.micro,
                                      "refused_by_plan": v.refused, "settings": list(v.settings),
                                      "total_bytes": v.at.total if v.at and not v.refused else None,
                                      "above_bytes": v.above.total if v.above and not v.refused else None}
                                     for v in vs],
                        "probe": probe.record() if probe else None}
    else:
        print("\n".join(lines(spec, target, vs)))
        if probe is not None:
            print("\n".join(probe.lines()))
        elif not args.probe:
            print("  probe: not run (--probe runs one step at that micro-batch where this machine has the device)",
                  file=sys.stderr)
    if probe is not None and probe.not_run:
        return exitcodes.NO_DEVICE
    if probe is not None and not probe.confirmed:
        return exitcodes.FAILED
    return exitcodes.OK if vs[0].micro and not vs[0].refused else exitcodes.FAILED


def add_fit(sub) -> None:
    from accelctl.cli.tables import table_options

    f = sub.add_parser("fit")
    f.add_argument("file")
    f.add_argument("--target", "-t", required=True)
    f.add_argument("--workload", "-w")
    f.add_argument("--probe", action="store_true",
                   help="confirm with one real step at that micro-batch (and one at the next) under the target's "
                        "memory (cpu targets: this machine)")
    table_options(f)
    f.set_defaults(fn=cmd_fit)
