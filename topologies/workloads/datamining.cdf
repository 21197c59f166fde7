# Data Mining workload: the flow-size distribution of the data mining cluster measured in
# VL2 (A. Greenberg et al., "VL2: A Scalable and Flexible Data Center Network", SIGCOMM 2009), as
# distributed with the pFabric and pHost simulators: file py/CDF_datamining.txt of
# https://github.com/NetSys/simulator (pHost thesis §5.4.1 "Data Mining" [62]).
#
# Form and units: the source gives "size_in_packets 1 cumulative_probability" per line; the
# simulator multiplies the size by 1460 (one MSS) to get bytes (NetSys/simulator coresim/event.cpp:
# size = nv_bytes->value() * 1460).  Here every size is that product, in bytes; the
# probabilities are unchanged.  The source's points, in packets, are:
#   1:0 1:0.5 2:0.6 3:0.7 7:0.8 267:0.9 2107:0.95 66667:0.99 666667:1
# The pHost/pFabric simulators interpolate linearly between points (ns-2's EmpiricalRandomVariable)
# and round the result up to whole packets; p4rotor interpolates linearly in bytes and does not
# round to packets.  A first line "S 0" followed by "S P" puts probability P on size S exactly.
#
# Format: one "size_bytes cumulative_probability" per line; '#' starts a comment; docs/workloads.md.
1460 0
1460 0.5
2920 0.6
4380 0.7
10220 0.8
389820 0.9
3076220 0.95
97333820 0.99
973333820 1
