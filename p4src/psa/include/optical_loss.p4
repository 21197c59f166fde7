// p4rotor on PSA: optical loss per link direction ([Zhuo19 §3]); P(loss) = threshold / 2^32.
// A link direction is a rotor port's input (frames from the rack) or output.
#ifndef P4ROTOR_PSA_OPTICAL_LOSS_P4
#define P4ROTOR_PSA_OPTICAL_LOSS_P4

control OpticalLoss(in bit<16> matching, in Port_t in_port, in Port_t out_port, out bool lost) {
    // Per rotor port: frames that crossed its input or output, and frames lost there (what a
    // CorrOpt-style monitor reads).  A frame lost coming in never meets its way out.
    Counter<bit<64>, bit<32>>(MAX_PORTS, PSA_CounterType_t.PACKETS) link_in_counter;
    Counter<bit<64>, bit<32>>(MAX_PORTS, PSA_CounterType_t.PACKETS) link_in_loss_counter;
    Counter<bit<64>, bit<32>>(MAX_PORTS, PSA_CounterType_t.PACKETS) link_out_counter;
    Counter<bit<64>, bit<32>>(MAX_PORTS, PSA_CounterType_t.PACKETS) link_out_loss_counter;
    Random<bit<32>>(0, 32w0xFFFFFFFF) rng;
    bit<32> threshold = 0;

    action lossy(bit<32> threshold_) { threshold = threshold_; }
    action lossless() { threshold = 0; }

    table loss_in {
        key = { in_port : exact @name("port"); matching : ternary @name("matching"); }  // mask 0: every matching
        actions = { lossy; lossless; }
        const default_action = lossless;
        size = LOSS_TABLE_SIZE;
    }

    table loss_out {
        key = { out_port : exact @name("port"); matching : ternary @name("matching"); }
        actions = { lossy; lossless; }
        const default_action = lossless;
        size = LOSS_TABLE_SIZE;
    }

    apply {
        lost = false;
        loss_in.apply();
        if (rng.read() < threshold) {
            link_in_loss_counter.count(in_port);
            lost = true;
        } else {
            link_in_counter.count(in_port);
            threshold = 0;
            loss_out.apply();
            if (rng.read() < threshold) {
                link_out_loss_counter.count(out_port);
                lost = true;
            } else {
                link_out_counter.count(out_port);
            }
        }
    }
}

#endif
