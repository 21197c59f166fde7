// p4rotor: optical loss on the rotor's links ([Zhuo19 §3]: corruption is per link, stable,
// load-independent and mostly one-way).  Applied at egress, where a frame meets its
// link (on TNA egress also has the stage room the ingress lacks).  A link direction is a rotor port's input (frames from
// the rack) or output (frames to the rack); each may lose frames with a probability, in every
// slot or only while a given matching is live.  Lost frames are counted as DROP_OPTICAL_LOSS, so
// injected loss is never confused with reconfiguration loss, and per link direction
// (below) for the CorrOpt monitor.  No tc netem needed.
#ifndef P4ROTOR_OPTICAL_LOSS_P4
#define P4ROTOR_OPTICAL_LOSS_P4

// Optical loss per link direction (declared at top level:
// v1model counters outside a control are what P4Runtime reads by name): what a CorrOpt-style monitor reads to
// estimate each link's loss rate.  drop_counter's OPTICAL_LOSS cannot say which link lost a
// frame, and rx/tx cannot say which direction.  Per rotor port: frames that crossed its input
// (from the rack) or output, and frames lost there.  A frame lost coming in never meets its
// way out.  (Four counters indexed by the port: a Tofino counter index is one field.)
counter(MAX_PORTS, CounterType.packets) link_in_counter;
counter(MAX_PORTS, CounterType.packets) link_in_loss_counter;
counter(MAX_PORTS, CounterType.packets) link_out_counter;
counter(MAX_PORTS, CounterType.packets) link_out_loss_counter;

control OpticalLoss(in bit<16> matching, inout std_meta_t std, out bool lost) {
    // P(loss) = threshold / 2^32: the controller writes round(rate * 2^32), 0xFFFFFFFF for 1.
    bit<32> threshold = 0;

    action lossy(bit<32> threshold_) { threshold = threshold_; }
    action lossless() { threshold = 0; }

    table loss_in {
        key = {
            std.ingress_port : exact   @name("port");
            matching         : ternary @name("matching");  // mask 0: every matching
        }
        actions = { lossy; lossless; }
        const default_action = lossless;
        size = LOSS_TABLE_SIZE;
    }

    table loss_out {
        key = {
            std.egress_port : exact   @name("port");
            matching        : ternary @name("matching");
        }
        actions = { lossy; lossless; }
        const default_action = lossless;
        size = LOSS_TABLE_SIZE;
    }

    apply {
        lost = false;
        bit<32> r;
        loss_in.apply();
        random(r, 0, 32w0xFFFFFFFF);
        if (r < threshold) {
            link_in_loss_counter.count((bit<32>) std.ingress_port);
            drop_counter.count(DROP_OPTICAL_LOSS);
            mark_to_drop(std);
            lost = true;
        } else {
            link_in_counter.count((bit<32>) std.ingress_port);
            threshold = 0;
            loss_out.apply();
            random(r, 0, 32w0xFFFFFFFF);
            if (r < threshold) {
                link_out_loss_counter.count((bit<32>) std.egress_port);
                drop_counter.count(DROP_OPTICAL_LOSS);
                mark_to_drop(std);
                lost = true;
            } else {
                link_out_counter.count((bit<32>) std.egress_port);
            }
        }
    }
}

#endif
