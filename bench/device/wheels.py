"""The carried wheels' list (``scripts/device-wheels.txt``) checked, offline.

``python -m bench.device.wheels --check LIST [--folder .whl]``: each line well-formed
(``name==version sha256 bytes (role)``), one version per package, the recorded total under
the device tool's 64 MiB; with ``--folder``, the downloaded files: one per line, each PyPI
wheel's sha256 as listed, a cp312/abi3/py3 manylinux x86-64 (or pure) tag, and their real total
under 64 MiB.  Exit 0 when all holds, 1 with the problems printed.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
from dataclasses import dataclass
from pathlib import Path

LIMIT_BYTES = 64 * 1024 * 1024
#: deepspeed is built here from its sdist: its wheel's hash differs from build to build
BUILT_HERE = ("deepspeed",)
LINE = re.compile(r"^(?P<name>[A-Za-z0-9_.-]+)==(?P<version>[A-Za-z0-9_.+-]+)\s+(?P<sha>[0-9a-f]{64})\s+"
                  r"(?P<bytes>\d+)\s+\((?P<role>[^)]+)\)\s*$")
TAG_OK = re.compile(r"-(py3-none-any|cp312-cp312-manylinux\S*x86_64|cp3\d+-abi3-manylinux\S*x86_64)\.whl$")


@dataclass(frozen=True)
class Wheel:
    name: str
    version: str
    sha256: str
    size: int
    role: str

    @property
    def key(self) -> str:
        return canonical(self.name)


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def read(path: Path) -> tuple[list[Wheel], list[str]]:
    wheels, problems = [], []
    for n, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = LINE.match(line)
        if m is None:
            problems.append(f"{path}:{n}: not 'name==version sha256 bytes (role)': {line}")
            continue
        wheels.append(Wheel(m["name"], m["version"], m["sha"], int(m["bytes"]), m["role"]))
    return wheels, problems


def check_list(wheels: list[Wheel]) -> list[str]:
    problems = []
    seen: dict[str, str] = {}
    for w in wheels:
        if w.key in seen:
            problems.append(f"{w.name}: two versions ({seen[w.key]}, {w.version}); one stops the whole install")
        seen[w.key] = w.version
    total = sum(w.size for w in wheels)
    if total >= LIMIT_BYTES:
        problems.append(f"the listed wheels total {total / 2**20:.1f} MiB, over the 64 MiB a device command carries")
    return problems


def check_folder(wheels: list[Wheel], folder: Path) -> list[str]:
    problems = []
    files = sorted(folder.glob("*.whl"))
    by_key = {canonical(f.name.split("-")[0]): f for f in files}
    for w in wheels:
        f = by_key.get(w.key)
        if f is None:
            problems.append(f"{w.name}=={w.version}: no wheel in {folder}")
            continue
        if f"-{w.version}-" not in f.name:
            problems.append(f"{f.name}: not version {w.version}")
        if not TAG_OK.search(f.name):
            problems.append(f"{f.name}: not a wheel for CPython 3.12 on manylinux x86-64")
        if w.name not in BUILT_HERE and hashlib.sha256(f.read_bytes()).hexdigest() != w.sha256:
            problems.append(f"{f.name}: sha256 differs from the list's")
    extra = set(by_key) - {w.key for w in wheels}
    problems += [f"{by_key[k].name}: not in the list" for k in sorted(extra)]
    total = sum(f.stat().st_size for f in files)
    if total >= LIMIT_BYTES:
        problems.append(f"{folder} holds {total / 2**20:.1f} MiB of wheels, over 64 MiB")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.device.wheels", description=__doc__.splitlines()[0])
    ap.add_argument("--check", type=Path, required=True, help="the list (scripts/device-wheels.txt)")
    ap.add_argument("--folder", type=Path, help="the downloaded wheels (.whl)")
    args = ap.parse_args(argv)
    wheels, problems = read(args.check)
    problems += check_list(wheels)
    if args.folder is not None:
        problems += check_folder(wheels, args.folder)
    for p in problems:
        print(f"device wheels: {p}", file=sys.stderr)
    total = sum(w.size for w in wheels)
    where = f" in {args.folder}" if args.folder is not None else ""
    print(f"device wheels: {len(wheels)} listed, {total / 2**20:.1f} MiB{where}: {'ok' if not problems else 'FAILED'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
