"""The worker: small loops, one job each, owned by one process.

- `slots`        handler slots: claim a ready task, run it through the executor, record it
- `watchdog`     activity and workflow timeouts, timers, lost workers, and the decisions they
                 make ready
- `deadlines`    expired deadlines, their on_deadline handlers side by side
- `housekeeping` running attempts no longer current; systemd STATUS= and WATCHDOG=; and the
                 pruner, which deletes closed instances past their retention a batch at a time
- `lease`        the worker's liveness lease and the attempts' latest heartbeats
- `process`      the `Worker` that owns them: threads, supervision, signals, shutdown

Each loop does one pass with `run_once(now) -> bool`; `run()` repeats it, waiting on an event.
A loop is given what it uses (`loop.Shared`, `attempts.Attempts`, the worker's record), never
the process.
"""

from wfctl.worker.options import WorkerOptions
from wfctl.worker.process import ONCE_NOTICE, Worker, install_signal_handlers

__all__ = ["ONCE_NOTICE", "Worker", "WorkerOptions", "install_signal_handlers"]
