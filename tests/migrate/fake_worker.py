"""A worker that misbehaves on purpose, by the name of the model it is given (tests only; used
through CONVERTER_MIGRATE_WORKER):

- ``*hang*``: sleeps for ten minutes (the time limit must stop it);
- ``*crash*``: kills itself with SIGKILL (a worker dying mid-model);
- ``*oom*``: sets the worker's memory limit as the worker does, then asks for 2 GiB (a model that
  needs more memory than it is allowed);
- ``*slow*``: sleeps ``FAKE_WORKER_SLOW`` seconds (default 2), then converts as the real worker;
- anything else: the real worker (converter/migration/worker.py).
"""

from __future__ import annotations

import io
import json
import os
import signal
import sys
import time

from converter.migration import worker

line = sys.stdin.readline()
request = json.loads(line)
name = request["task"]["rel"]
worker._die_with_parent(request.get("parent"))
if "hang" in name:
    time.sleep(600)
if "crash" in name:
    os.kill(os.getpid(), signal.SIGKILL)
if "oom" in name:
    worker._limit_memory(request.get("memory_mib"))
    hog = bytearray(1 << 31)
if "slow" in name:
    time.sleep(float(os.environ.get("FAKE_WORKER_SLOW", "2")))
sys.stdin = io.StringIO(line)
worker.main()
