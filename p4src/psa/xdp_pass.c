// An XDP program that passes every frame.  The emulation loads it on the hosts' ends of the
// veths that reach an eBPF switch: a veth only takes frames another program XDP_REDIRECTs to it
// when its peer runs XDP too.
#include <linux/bpf.h>

__attribute__((section("xdp"), used)) int xdp_pass(struct xdp_md *ctx) { return XDP_PASS; }

char _license[] __attribute__((section("license"), used)) = "GPL";
