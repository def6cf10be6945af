#!/usr/bin/env python3
"""Runs a `lingbot-map run ... --emit jsonl`, sends SIGNAL once K frames have
been reported on stdout, and waits for it to exit.

  interrupt_run.py SIGNAL K [--twice] COMMAND...

--twice: the signal again 0.01 s later (a second Ctrl-C).

Prints one JSON line: the exit status, the frames reported before the
signal, and whether the run had already ended before it could be signalled.
"""
import json
import signal
import subprocess
import sys
import time


def main():
    sig = getattr(signal, sys.argv[1])
    k = int(sys.argv[2])
    twice = sys.argv[3] == "--twice"
    proc = subprocess.Popen(sys.argv[4 if twice else 3:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    seen = 0
    for line in proc.stdout:
        if line.startswith(b"{"):
            seen += 1
        if seen == k:
            break
    ended = proc.poll() is not None
    if not ended:
        proc.send_signal(sig)
        if twice:
            time.sleep(0.01)  # two signals at once would merge into one
            proc.send_signal(sig)
    rest = proc.stdout.read()
    stderr = proc.stderr.read().decode(errors="replace")
    rc = proc.wait()
    print(json.dumps({"status": rc, "reported_before_signal": seen, "ended_before_signal": ended,
                      "reported_in_all": seen + rest.count(b"\n{") + (1 if rest.startswith(b"{") else 0),
                      "stderr": stderr[-2000:]}))


if __name__ == "__main__":
    main()
