"""Checkpoint tier benchmark (run by hand: `python benchmarks/checkpoint_tier.py`;
not in CI).

A checkpoint of SIZE bytes (default 1 GB) saved to a tier on loopback
(`deepvm checkpoint serve`, its versions in /dev/shm, with a token) and restored
from it, through deepvm.checkpoint's client (`save_bytes`, `load_bytes`: SHA-256
on both ends, the tier hashing as the bytes arrive, the client as they come
back), against copying the same bytes into a /dev/shm file and reading them
back into fresh memory (a restore must land somewhere new). Runs alternate, side
by side in one process; the figure is the ratio of the medians (target: the tier
within 3x of the copy, issue 34). It also prints the copy into memory already
touched: the least a copy costs, below which two SHA-256 passes (about 0.55 s a
GB each here) cannot go.
"""

from __future__ import annotations

import argparse
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

SHM = Path("/dev/shm")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def copy_round(data: memoryview, folder: Path, reused: bytearray) -> tuple[float, float]:
    """Write the bytes to a /dev/shm file and read them back: the baseline, (into
    fresh memory, as a restore must; into memory already touched, the least a copy
    can cost)."""
    path = folder / "copy.bin"
    began = time.perf_counter()
    with open(path, "wb") as out:
        out.write(data)
    written = time.perf_counter()
    buffer = bytearray(len(data))
    with open(path, "rb") as back:
        back.readinto(buffer)
    took = time.perf_counter() - began
    again = time.perf_counter()
    with open(path, "rb") as back:
        back.readinto(reused)
    strict = written - began + time.perf_counter() - again
    assert buffer == data == reused
    path.unlink()
    return took, strict


def tier_round(data: memoryview, url: str, token: str, step: int) -> tuple[float, float]:
    """Save through the tier and restore from it: (save s, restore s)."""
    from deepvm.checkpoint import load_bytes, save_bytes

    began = time.perf_counter()
    saved = save_bytes(data, step, tiers=[url], token=token)
    saved_at = time.perf_counter()
    found = load_bytes(tiers=[url], token=token)
    done = time.perf_counter()
    assert saved.where == url and found is not None and found[1] == step
    assert len(found[0]) == len(data)
    return saved_at - began, done - saved_at


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gb", type=float, default=1.0, help="checkpoint size (default 1 GB)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    size = int(args.gb * 1e9)
    block = os.urandom(1 << 20)
    data = memoryview((block * (size // len(block) + 1))[:size])
    token = secrets.token_urlsafe(32)
    port = free_port()
    with tempfile.TemporaryDirectory(dir=SHM) as scratch:
        folder = Path(scratch)
        env = {**os.environ, "DEEPVM_CHECKPOINT_TOKEN": token}
        server = subprocess.Popen(
            [sys.executable, "-m", "deepvm", "-q", "checkpoint", "serve", "--dir",
             str(folder / "tier"), "--host", "127.0.0.1", "--port", str(port), "--versions", "1",
             "--capacity-gb", str(3 * args.gb)],
            env=env,
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        os.environ["DEEPVM_CHECKPOINT_DIR"] = str(folder / "local")
        try:
            for _ in range(200):
                try:
                    request = urllib.request.Request(
                        url + "/health", headers={"Authorization": f"Bearer {token}"}
                    )
                    urllib.request.urlopen(request, timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.05)
            copies, stricts, saves, restores = [], [], [], []
            reused = bytearray(data)  # touched once, up front
            for step in range(args.rounds):
                copy, strict = copy_round(data, folder, reused)
                copies.append(copy)
                stricts.append(strict)
                save, restore = tier_round(data, url, token, step)
                saves.append(save)
                restores.append(restore)
        finally:
            server.terminate()
            server.wait(10)
    copy, strict = statistics.median(copies), statistics.median(stricts)
    save, restore = statistics.median(saves), statistics.median(restores)
    print(f"{args.gb:g} GB, {args.rounds} rounds, medians")
    print(f"  copy into /dev/shm and back   {copy:.3f} s (into fresh memory, as a restore)")
    print(f"  the same, memory pre-touched  {strict:.3f} s (the least a copy can cost)")
    print(f"  tier save                     {save:.3f} s ({args.gb / save:.2f} GB/s)")
    print(f"  tier restore                  {restore:.3f} s ({args.gb / restore:.2f} GB/s)")
    print(f"  tier save + restore           {save + restore:.3f} s")
    ratio = (save + restore) / copy
    print(f"ratio tier / copy: {ratio:.2f}x (target <= 3x: {'met' if ratio <= 3 else 'NOT met'})")
    print(f"ratio tier / pre-touched copy: {(save + restore) / strict:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
