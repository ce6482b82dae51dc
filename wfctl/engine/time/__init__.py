"""Everything time does to a workflow: what is due, and what happens when it expires.

- `due`        what has expired of an activity or a run at an instant (the timeout kinds)
- `expiry`     activity and workflow timeouts, workflow task timeouts, timers (the retry
               policy's backoff too) and lost workers: `expire` and `lose_workers`
- `deadlines`  deadlines and `on_deadline`: claim an expiry, `fire_deadline` (run the handler,
               record the failure), and the one-off check `wfctl deadlines check` runs
- `claims`     the deadline claims one process holds
- `sweep`      one watchdog pass: finds what is due and hands it to `expiry`
- `workers`    whether a worker is alive (its process, its lease), and its record's lease

Each is an engine operation at an explicit `now`; the worker's loops and the CLI call them.
"""
