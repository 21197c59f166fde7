"""Energy per port state: a power model (model.py), the state-time arithmetic (states.py), a
run's per-port per-slot activity (activity.py: FCT runs; rotorlb_run.py: rotorlb runs), the four
policies over it (account.py), and the ``p4rotor energy`` command (cli.py, report.py).
docs/energy.md."""
