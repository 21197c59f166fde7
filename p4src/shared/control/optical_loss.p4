// p4rotor: optical loss on the rotor's links ([Zhuo19 §3]: corruption is per link, stable,
// load-independent and mostly one-way).  Applied at egress, where a frame meets its link (on
// TNA egress also has the stage room the ingress lacks).  A link direction is a rotor port's
// input (frames from the rack) or output (frames to the rack); each may lose frames with a
// probability, in every slot or only while a given matching is live.  The top counts a lost
// frame as DROP_OPTICAL_LOSS, so injected loss is never confused with reconfiguration loss.
// No tc netem needed.
#ifndef P4ROTOR_SHARED_OPTICAL_LOSS_P4
#define P4ROTOR_SHARED_OPTICAL_LOSS_P4
#include "common.p4"

control OpticalLoss(in bit<16> matching, in Port_t in_port, in Port_t out_port, out bool lost) {
    // Per rotor port: frames that crossed its input or output, and frames lost there: what a
    // CorrOpt-style monitor reads to estimate each link's loss rate (the drop counter cannot
    // say which link lost a frame, and rx/tx cannot say which direction).  A frame lost coming
    // in never meets its way out.  (Four counters indexed by the port: a Tofino counter index
    // is one field.)
    PORT_PACKET_COUNTER(link_in_counter);
    PORT_PACKET_COUNTER(link_in_loss_counter);
    PORT_PACKET_COUNTER(link_out_counter);
    PORT_PACKET_COUNTER(link_out_loss_counter);
    RANDOM32_DECL(rng)
    // P(loss) = threshold / 2^32: the controller writes round(rate * 2^32), 0xFFFFFFFF for 1.
    bit<32> threshold = 0;

    action lossy(bit<32> threshold_) { threshold = threshold_; }
    action lossless() { threshold = 0; }

    table loss_in {
        key = {
            in_port  : exact   @name("port");
            matching : ternary @name("matching");  // mask 0: every matching
        }
        actions = { lossy; lossless; }
        const default_action = lossless;
        size = LOSS_TABLE_SIZE;
    }

    table loss_out {
        key = {
            out_port : exact   @name("port");
            matching : ternary @name("matching");
        }
        actions = { lossy; lossless; }
        const default_action = lossless;
        size = LOSS_TABLE_SIZE;
    }

    apply {
        lost = false;
        bit<32> r;
        loss_in.apply();
        RANDOM32(rng, r);
        if (r < threshold) {
            link_in_loss_counter.count((bit<32>) in_port);
            lost = true;
        } else {
            link_in_counter.count((bit<32>) in_port);
            threshold = 0;
            loss_out.apply();
            RANDOM32(rng, r);
            if (r < threshold) {
                link_out_loss_counter.count((bit<32>) out_port);
                lost = true;
            } else {
                link_out_counter.count((bit<32>) out_port);
            }
        }
    }
}

#endif
