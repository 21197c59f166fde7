// p4rotor on TNA: optical loss on the rotor's links ([Zhuo19 §3]; the shared file
// (../../../shared/control/optical_loss.p4) explains the model).  At egress, as on v1model:
// ingress bridges the matching and the ingress port.  Tofino compares two variables by subtraction, so the draw
// and the threshold are compared on their top 31 bits, as a sign test: P(loss) =
// (threshold >> 1) / 2^31, the same rate as v1model's threshold / 2^32 to 2^-31.
#ifndef P4ROTOR_TNA_OPTICAL_LOSS_P4
#define P4ROTOR_TNA_OPTICAL_LOSS_P4

control OpticalLoss(in bit<16> matching, in PortId_t in_port, in PortId_t out_port,
                    out bool lost_in, out bool lost_out) {
    Random<bit<31>>() draw_in;
    Random<bit<31>>() draw_out;
    bit<32> r_in = 0;
    bit<32> r_out = 0;
    bit<32> threshold = 0;
    bit<32> d_in = 0;    // sign set: draw < threshold: lost
    bit<32> d_out = 0;

    // One action for both tables, as on v1model (one P4Info name: "lossy").
    action lossy(bit<32> threshold_) { threshold = (bit<32>) threshold_[31:1]; }
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

    action compare_in() { d_in = r_in - threshold; }
    action compare_out() { d_out = r_out - threshold; }

    apply {
        r_in = (bit<32>) draw_in.get();
        r_out = (bit<32>) draw_out.get();
        loss_in.apply();
        compare_in();
        loss_out.apply();
        compare_out();
        // A frame lost coming in never meets its way out (as on v1model).
        lost_in = SIGN(d_in) == 1;
        lost_out = !lost_in && SIGN(d_out) == 1;
    }
}

#endif
