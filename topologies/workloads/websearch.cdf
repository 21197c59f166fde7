# Web Search workload: the flow-size distribution of the web search cluster measured in
# DCTCP (M. Alizadeh et al., "Data Center TCP (DCTCP)", SIGCOMM 2010), as distributed with the
# pFabric and pHost simulators: file py/CDF_dctcp.txt of https://github.com/NetSys/simulator
# (the pHost simulator, which builds on pFabric's; pHost thesis §5.4.1 "Web Search" [15]).
#
# Form and units: the source gives "size_in_packets 1 cumulative_probability" per line; the
# simulator multiplies the size by 1460 (one MSS) to get bytes (NetSys/simulator coresim/event.cpp:
# size = nv_bytes->value() * 1460).  Here every size is that product, in bytes; the
# probabilities are unchanged.  The source's points, in packets, are:
#   6:0 6:0.15 13:0.2 19:0.3 33:0.4 53:0.53 133:0.6 667:0.7 1333:0.8 3333:0.9 6667:0.97 20000:1
# The pHost/pFabric simulators interpolate linearly between points (ns-2's EmpiricalRandomVariable)
# and round the result up to whole packets; p4rotor interpolates linearly in bytes and does not
# round to packets.  A first line "S 0" followed by "S P" puts probability P on size S exactly.
#
# Format: one "size_bytes cumulative_probability" per line; '#' starts a comment; docs/workloads.md.
8760 0
8760 0.15
18980 0.2
27740 0.3
48180 0.4
77380 0.53
194180 0.6
973820 0.7
1946180 0.8
4866180 0.9
9733820 0.97
29200000 1
