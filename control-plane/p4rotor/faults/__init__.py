"""Faults on a running emulation: generators drawn from measured distributions (``corropt``,
[Zhuo19]), the harness's injection (``inject``), captures (``capture``), CorrOpt's optimizer
against its fast checker on generated fault sets (``corropt_compare``) and ``p4rotor faults``.
A fault plan itself is data the controller reads too: ``control.fault_plan``."""
