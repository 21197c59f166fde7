# Data Mining workload (VL2, Greenberg et al., SIGCOMM 2009) as distributed with the Opera
# simulator (Mellette et al., NSDI 2020): file Figure1_traffic/datamining.csv of
# https://github.com/TritonNetworking/opera-sim, read by Figure7_datamining/opera/traffic_gen/
# generate_traffic.m ("pfabric datamining workload", as its comment says).
#
# Form and units: the source is a CSV of "size_bytes,cumulative_probability"; the values here are
# the same, separated by a space.  This is a different digitisation from the pFabric/pHost file
# (datamining.cdf): more points, sizes in bytes.  Opera's generate_traffic.m samples it as a step
# function (the first point whose probability is >= u, no interpolation) and sets the load from
# payload bytes at 10 Gb/s; p4rotor interpolates linearly and counts headers (docs/workloads.md).
#
# Format: one "size_bytes cumulative_probability" per line; '#' starts a comment; docs/workloads.md.
100 0
180 0.085
250 0.14
560 0.33
900 0.47
1100 0.55
1870 0.65
3160 0.7
10000 0.8
100001 0.874
400000 0.9
1850000 0.95
10000000 0.97
30000000 0.98
100000000 0.99
250000000 0.995
1000000000 1
