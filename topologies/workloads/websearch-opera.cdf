# Web Search workload (DCTCP, Alizadeh et al., SIGCOMM 2010) as distributed with the Opera
# simulator (Mellette et al., NSDI 2020): file Figure1_traffic/websearch.csv of
# https://github.com/TritonNetworking/opera-sim, read by Figure10_combined_shuffle_websearch/
# opera/traffic_gen/generate_traffic.m ("websearch workload").
#
# Form and units: the source is a CSV of "size_bytes,cumulative_probability"; the values here are
# the same, separated by a space.  This is a different digitisation from the pFabric/pHost file
# (websearch.cdf): more points, sizes in bytes.  Opera's generate_traffic.m samples it as a step
# function (the first point whose probability is >= u, no interpolation) and sets the load from
# payload bytes at 10 Gb/s; p4rotor interpolates linearly and counts headers (docs/workloads.md).
#
# Format: one "size_bytes cumulative_probability" per line; '#' starts a comment; docs/workloads.md.
4000 0
5971 0.07704918
8722 0.152459016
18614 0.195081967
27563 0.3
44871 0.427868852
77113 0.532786885
193593 0.601639344
620119 0.696721311
1933313 0.801639344
3147330 0.860655738
4853634 0.903278689
6901099 0.942622951
9812271 0.972131148
15759080 0.985245902
28589215 1
