"""A worker factory: one process that imports the converter once and forks one worker per model.

``python -m converter.migration.zygote`` reads requests (JSON lines, as `worker.main` takes them)
on stdin. For each it forks a worker (`worker.serve` in the child, which is single-threaded here,
so forking is safe), writes ``{"pid": PID}`` on stdout, waits for the worker, then writes
``{"entry": ENTRY_OR_NULL, "status": WAIT_STATUS}``. Forking from it costs milliseconds where a
new interpreter that imports the converter costs a few hundred.

Unlike `multiprocessing`'s fork server it never imports the caller's ``__main__`` again (a script
without an ``if __name__ == "__main__"`` guard calling `converter.migrate` is fine). The factory
dies with the thread of the migration that started it and every worker with its factory
(``PR_SET_PDEATHSIG``), so ``kill -9`` of a migration leaves no process behind; when its stdin
closes it exits too.
"""

from __future__ import annotations

import json
import os
import sys


def _run_child(request: dict, w: int) -> None:
    """In the forked worker: convert, send the entry through ``w``, exit without cleanup."""
    code = 0
    try:
        from .worker import _die_with_parent, serve

        _die_with_parent(None)
        data = json.dumps(serve(request)).encode()
        view = memoryview(data)
        while view:
            view = view[os.write(w, view):]
    except MemoryError:
        code = 75  # seen by the parent as "memory"
    except BaseException:  # noqa: BLE001 - the parent reports a worker that ended without an entry
        code = 70
    os._exit(code)


def main() -> None:
    from .worker import _die_with_parent

    _die_with_parent(int(sys.argv[1]) if len(sys.argv) > 1 else None)
    import converter.migration.preload  # noqa: F401 - imported once, inherited by every worker

    out = sys.stdout
    for line in sys.stdin:
        request = json.loads(line)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the worker
            os.close(r)
            _run_child(request, w)
        os.close(w)
        out.write(json.dumps({"pid": pid}) + "\n")
        out.flush()
        chunks = []
        while chunk := os.read(r, 1 << 16):
            chunks.append(chunk)
        os.close(r)
        _, status = os.waitpid(pid, 0)
        data = b"".join(chunks)
        try:
            entry = json.loads(data) if data else None
        except ValueError:
            entry = None
        out.write(json.dumps({"entry": entry, "status": status}) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
