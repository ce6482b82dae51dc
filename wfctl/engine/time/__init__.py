"""Everything time does to a workflow: what is due, and what happens when it expires.

- `timeouts`   which timeout of an activity or a run has expired at an instant, and what
               expiring does: an activity's attempt, a workflow task, a run
- `expiry`     what is due, enforced: expired timeouts, workflow task timeouts, timers (the
               retry policy's backoff too) and lost workers: `expire` and `lose_workers`
- `deadlines`  deadlines and `on_deadline`: claim an expiry, `fire_deadline` (run the handler,
               record the failure), and the one-off check `wfctl deadlines check` runs
- `claims`     the deadline claims one process holds
- `sweep`      one watchdog pass: finds what is due and hands it to `expiry`
- `workers`    whether a worker is alive (its process, its lease), and its record's lease

Each is an engine operation at an explicit `now`; the worker's loops and the CLI call them.
"""
