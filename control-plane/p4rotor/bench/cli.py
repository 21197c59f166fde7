"""``p4rotor bench``: benchmarks into results/bench.json and docs/performance.md."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..cliutil import EXIT_RUNTIME, default_build_dir, die

EXIT_INTERRUPTED = 130  # the shell's status for a run stopped by a signal


def add_parser(sub) -> None:
    pb = sub.add_parser("bench", help="benchmarks into results/bench.json (needs root, p4c build, BMv2)")
    pb.add_argument("--only", help="comma list of: slot, throughput, loss, dilation, control, scale, agents, datapath, fabric-agents, claims, kernel, kernel-scale, fabric-tcp, energy")
    pb.add_argument("--scale-sizes", help="scale: comma list of RACKS (4 rotors) or RACKSxROTORS (default 16,32,64)")
    pb.add_argument("--scale-kind", default="rotornet", help="scale: rotornet (default) or opera schedules")
    pb.add_argument("--scale-fabric", default="multi-switch",
                    help="scale: multi-switch (a BMv2 per ToR and rotor, default) or one-switch (docs/one-switch.md)")
    pb.add_argument("--scale-target", default="bmv2",
                    help="scale: bmv2 (default) or ebpf (a NIKSS pipeline per ToR and rotor; multi-switch only)")
    pb.add_argument("--quick", action="store_true", help="fewer slot lengths, shorter runs")
    pb.add_argument("--rate", type=float, default=1000, help="offered probe load, frames/s")
    pb.add_argument("--output", default="results/bench.json",
                    help="with --only, the sections run are merged into the results already there")
    pb.add_argument("--doc", default="docs/performance.md", help="update the table in this file ('' to skip)")
    pb.add_argument("--build-dir")
    pb.set_defaults(fn=cmd_bench)


def cmd_bench(a: argparse.Namespace) -> int:
    from . import report
    from . import run as bench
    from ..fabric.switch import missing_tools

    build = Path(a.build_dir) if a.build_dir else default_build_dir()
    miss = missing_tools()
    for prog in ("rotor", "passthrough"):
        if not (build / f"{prog}.json").exists():
            miss.append(f"{build / prog}.json (make build)")
    if miss:
        die("benchmarks need: " + ", ".join(miss) + " (docs/toolchain.md)", EXIT_RUNTIME)
    every = ("slot", "throughput", "loss", "dilation", "control", "scale", "agents", "datapath", "fabric-agents", "claims", "kernel",
             "kernel-scale", "fabric-tcp", "energy")
    only = set(a.only.split(",")) if a.only else set(every)
    unknown = only - set(every)
    if unknown:
        die(f"--only: unknown benchmark {', '.join(sorted(unknown))} ({', '.join(every)})")
    try:
        sizes = bench.parse_scale_sizes(a.scale_sizes or ",".join(map(str, bench.SCALE_SIZES)),
                                        a.scale_kind, a.scale_fabric, a.scale_target)
    except ValueError as ex:
        die(f"--scale-sizes: {ex}")
    command = " ".join(["p4rotor bench", *sys.argv[2:]])
    try:
        res = bench.run_all(build, Path(a.output), only, quick=a.quick, rate=a.rate, scale_sizes=sizes,
                            merge=bool(a.only), command=command)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM (cli.main): each fabric's own cleanup has run by now
        print(f"p4rotor bench: interrupted; every switch, namespace and pipeline it started was removed, "
              f"{a.output} left as it was", file=sys.stderr)
        return EXIT_INTERRUPTED
    if a.doc:
        report.update_doc(Path(a.doc), res, command)
        print(f"updated {a.doc}", file=sys.stderr)
        if res.get("dilation") and "dilation" in only:
            png = Path(a.doc).parent / "img" / "dilation.png"
            report.plot_dilation(res["dilation"], png)
            print(f"wrote {png}", file=sys.stderr)
    return 0
