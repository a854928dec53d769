#!/usr/bin/env python3
"""Stores keys through pylibmc's (libmemcached's) weighted ketama, for
kura-ring's differential tests, which then ask each server which keys it holds.

Usage: place_pylibmc.py SERVERS KEYS_FILE

SERVERS is a comma-separated list of HOST:PORT:WEIGHT; KEYS_FILE has one key
per line (UTF-8 or any bytes but space, control characters and newline).
Each key is set to "1"; exits non-zero if any set fails.
"""
import sys

import pylibmc


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    servers = sys.argv[1].split(",")
    with open(sys.argv[2], "rb") as f:
        keys = [line.rstrip(b"\n") for line in f]
    mc = pylibmc.Client(servers, behaviors={"ketama_weighted": True})
    for key in keys:
        if not mc.set(key, b"1"):
            sys.exit(f"pylibmc: set {key!r} failed")
    print(f"pylibmc {pylibmc.__version__} (libmemcached {pylibmc.libmemcached_version}): "
          f"{len(keys)} keys set over {len(servers)} servers")


if __name__ == "__main__":
    main()
