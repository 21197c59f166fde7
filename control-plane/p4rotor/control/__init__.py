"""The P4Runtime control plane (``from p4rotor import control as C``, as finsy's ``fy``).

One module per job: ``entities`` (rotor entities and control packets as values), ``tor``
(the ToR's), ``p4info`` (the program contract check), ``target`` (what differs between BMv2,
Tofino and eBPF: time units, ports, device config), ``nikss``/``nikss_switch`` (target ebpf: the
entities as nikss-ctl commands on a NIKSS pipeline, standing for P4Runtime), ``timebase`` (common time, offsets, slot
boundaries), ``clockport`` (time probes on the data path), ``skew`` (injected clock skew and
the periodic re-sync's decision), ``loss_monitor`` (the live CorrOpt monitor's estimates and
decisions), ``fast_checker`` (which lossy links can go), ``corropt_optimizer`` (CorrOpt's
optimizer: which set of them to disable), ``fault_plan`` (fault plans as data),
``one_switch`` (the one-switch fabric's), ``roles`` (what each switch gets), ``fabric_roles``
(every switch of a topology), ``status`` (the status file other processes read), ``errors``.

``runtime`` is the asyncio controller (a task per switch), ``options`` its options by job, and
its helpers one per job: ``installer``, ``prober``, ``rotator``, ``clock_keeper``,
``fault_injector`` (with ``timing``'s one timed-change helper), ``counters``, ``corropt_task``,
``reconnect``.
"""

from .entities import (RUN_FIELDS, TS_MASK, WRITE_BATCH, Comparison, LinkLoss,  # noqa: F401
                       check_egress_guard, circuit_entries, clock_phase_entries, compare_installed, diff_entities,
                       config_entry, default_port_map, loss_entries, phase_entries, port_mtu_entries, sleep_entries,
                       port_value_set_entries, rotor_entities, set_slot_packet, slot_config_entry,
                       time_probe_packet, write_batched)
from .errors import ControllerError, NotPrimaryError  # noqa: F401
from .loss_monitor import Estimate, LossMonitor  # noqa: F401
from .p4info import check_p4info  # noqa: F401
from .roles import Role, SwitchRuntime, SwitchSpec, Trace, rotor_role  # noqa: F401
from .skew import (ClockDrift, ClockSkew, LossFault, ResyncCheck, drift_at, drift_changes, loss_changes,  # noqa: F401
                   skew_at, skew_changes)
from .installer import INSTALL_CONCURRENCY  # noqa: F401
from .options import CorrOptOptions, InjectedFaults, ResyncOptions, SignalOptions  # noqa: F401
from .runtime import Controller, RotorController  # noqa: F401
from .target import BMV2, EBPF, TARGETS, TOFINO, Target, get_target, is_slot_config  # noqa: F401
from .tor import slice_boundaries, slice_spans, tor_entities  # noqa: F401
from .one_switch import host_ports, one_switch_entities  # noqa: F401
from .timebase import (AdoptedClock, OffsetEstimate, Timebase, adopt_clock, boundary_times,  # noqa: F401
                       estimate_offset, timed_changes)
