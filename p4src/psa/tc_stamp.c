// TC programs for the fidelity bench (bench/kernel.py).  tc_stamp, at egress, writes the kernel clock
// (bpf_ktime_get_ns, CLOCK_MONOTONIC, the clock the PSA programs read) big-endian into bytes
// 14..21 of each bench frame (EtherType 0x88B5) as it leaves the sender's veth.  The frame's
// stamp is then its send time one veth hop before the switch's ingress, not the time a Python
// sender read the clock (which the interpreter and the scheduler delay by microseconds).
#include <linux/bpf.h>
#include <linux/pkt_cls.h>

static long (*bpf_skb_store_bytes)(void *skb, __u32 offset, const void *from, __u32 len, __u64 flags) = (void *)9;
static __u64 (*bpf_ktime_get_ns)(void) = (void *)5;

// The kernel clock, big-endian, into the 8 bytes at ``at`` of a bench frame (EtherType 0x88B5).
static inline __attribute__((always_inline)) int stamp_at(struct __sk_buff *skb, __u32 at) {
    void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
    unsigned char *eth = data;
    if (data + at + 8 > end || eth[12] != 0x88 || eth[13] != 0xB5)
        return TC_ACT_OK;
    __u64 t = __builtin_bswap64(bpf_ktime_get_ns());
    bpf_skb_store_bytes(skb, at, &t, 8, 0);
    return TC_ACT_OK;
}

__attribute__((section("tc"), used)) int tc_stamp(struct __sk_buff *skb) { return stamp_at(skb, 14); }

// The same clock into bytes 22..29 as the frame comes in at a receiver's veth (TC ingress, after
// the switch's egress delivered it): with the departure stamp, it brackets the moment the switch's
// pipeline took the frame in, so a slot decision the bracket cannot explain is the pipeline's error.
__attribute__((section("tc_rx"), used)) int tc_stamp_rx(struct __sk_buff *skb) { return stamp_at(skb, 22); }

char _license[] __attribute__((section("license"), used)) = "GPL";
