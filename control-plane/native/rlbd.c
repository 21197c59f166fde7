/* rlbd: a RotorLB host agent's per-frame data path (docs/rotorlb.md, "The compiled data path").
 *
 * The agent (control-plane/p4rotor/host/fast_agent.py) keeps every per-slot decision -- OFFER,
 * ACCEPT and the amounts, from rotorlb/core.py, the code the fluid model runs -- and tells this
 * process, one message per decision, what to do with frames.  rlbd does all per-frame work:
 * queues per destination rack (the agent's own flows served in turn, relayed frames in arrival
 * order), pacing each circuit window's frames at the circuit's rate (and the host's link over all
 * windows), relay store-and-forward, sequence numbers, exactly-once delivery, and the counts of
 * every frame it refuses, by cause.  Frames use rotorlb/wire.py's DATA layout.
 *
 * Control: a SOCK_SEQPACKET socket (--ctl FD), one message per request, little-endian structs
 * (p4rotor/host/datapath.py packs them):
 *   header: u8 op, u8 0, u16 0, u32 request id
 *   1 ADD_LOCAL  u16 dst, u16 0, u32 flow, u32 frames          (no reply)
 *   2 STATE      -> reply: u32 n, n x {u16 dst, u16 0, u32 frames}  local per destination,
 *                  u32 m, m x {u16 dst, u16 origin, u32 slot, u32 frames}  relay chunks, FIFO
 *   3 WIN_OPEN   u32 win, u16 rotor, u16 peer, u32 slot, u32 0, u64 end_ns, u64 gap_ns  (no reply)
 *   4 WIN_ADD    u32 win, u8 kind, u8 0, u16 dst, u32 frames   -> reply: u32 moved
 *                  kind 0: relayed frames for the peer (second hop), 1: own frames to the peer,
 *                  2: own frames for rack dst, to the peer as relay (first hop)
 *   5 STATS      path (NUL-terminated): the counts as JSON, written there -> reply: u32 1 (written) or 0
 *   6 LINK       u64 gap_ns: the host's link over every window (0: no cap)        (no reply)
 *   7 STOP       (no reply; rlbd exits)
 *   8 ADD_STREAM u16 dst, u8 fin, u8 0, u32 flow, bytes      -> reply: u32 frames queued for dst,
 *                  u32 the stream's next sequence number (one past its last frame)
 *   9 DROP_FLOW  u16 dst, u16 0, u32 flow: forget the flow's frames queued for dst, and resend none
 *                  of those sent (its connection was reset)  -> reply: u32 frames dropped
 *  11 WIN_ADD_FLOW u32 win, u8 kind (1 or 2, as WIN_ADD), u8 0, u16 dst, u32 flow, u32 below,
 *                  u32 most: up to ``most`` own frames of ``flow`` for rack dst with a sequence number
 *                  below ``below`` go first in window win (ahead of its unsent frames)
 *                  -> reply: u32 moved, u32 of those frames still queued
 * Events, unrequested: 100 WIN_DONE u32 win, u32 sent, u32 returned (the window ended; what it
 * could not send went back to the head of its queues).  Replies: 200, the request id, the payload.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_RACKS 1024
#define MAX_WINDOWS 64
#define BATCH 64
#define BURST_NS 100000   /* after a stall, frames that fell due this long ago still leave at once */
#define IO_EVERY_NS 20000
#define RX_COALESCE_NS 100000 /* after a frame wakes it, rlbd waits this long (if free) for more */
#define SPIN_NS 60000     /* a sleep here wakes up to ~50 us late: awake at most this long before a frame */
#define HEAD 32          /* wire.DATA_HEADER: type, rotor, slot + origin, flow, seq, dst, flags, acc, sent */
#define MAX_FRAME 9000
#define DELAY_BUCKETS 64
#define PACE_BUCKETS 20001 /* pacing error and transit histograms: 1 us buckets to 20 ms, the last one open */
#define RELAY_CAP (1u << 24)
#define MAX_SEQ (1u << 27)   /* frames per flow: 188 GB of 1400-byte frames; beyond, refused (bad_seq) */ /* frames held for relay at most: beyond, refused and counted */

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("rlbd: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

static void *xrealloc(void *p, size_t n) {
    p = realloc(p, n);
    if (!p && n) die("out of memory");
    return p;
}

static uint64_t wall_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts); /* time.time_ns(): the clock the agents' schedule uses */
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- a frame to send, and growable double-ended queues of them ------------------------------- */
typedef struct {
    uint32_t flow, seq, count; /* count > 1: a run of synthetic frames seq, seq+1, ... */
    uint32_t acc;              /* relay: the slot it was accepted in */
    uint16_t origin, dst;
    uint8_t relayed;
    uint8_t fl;                /* FL_PAYLOAD: carries buf (len bytes, maybe 0); FL_FIN: a stream's end */
    uint16_t len;
    uint8_t *buf;              /* owned by whoever holds the item */
} item_t;
#define FL_PAYLOAD 2 /* wire flags bit 1 */
#define FL_FIN 4     /* wire flags bit 2: the last frame of a stream (host/stream.py) */

typedef struct {
    item_t *v;
    size_t cap, head, n;
} deq_t;

static item_t *deq_at(deq_t *d, size_t i) { return &d->v[(d->head + i) & (d->cap - 1)]; }

static void deq_grow(deq_t *d) {
    if (d->n < d->cap) return;
    size_t nc = d->cap ? d->cap * 2 : 16;
    item_t *v = xrealloc(NULL, nc * sizeof *v);
    for (size_t i = 0; i < d->n; i++) v[i] = *deq_at(d, i);
    free(d->v);
    d->v = v, d->cap = nc, d->head = 0;
}

static void deq_push(deq_t *d, item_t it) {
    deq_grow(d);
    *deq_at(d, d->n++) = it;
}

static void deq_push_front(deq_t *d, item_t it) {
    deq_grow(d);
    d->head = (d->head - 1) & (d->cap - 1);
    d->v[d->head] = it;
    d->n++;
}

static item_t deq_pop(deq_t *d) {
    item_t it = d->v[d->head];
    d->head = (d->head + 1) & (d->cap - 1);
    d->n--;
    return it;
}

/* ---- own frames for one destination: one queue per flow, served in turn (host/flowqueue.py) -- */
typedef struct {
    uint32_t flow;
    deq_t q;
    uint64_t frames;
} fq_flow_t;

typedef struct {
    fq_flow_t *flows;
    size_t nflows, cap;
    size_t turn;   /* index of the flow whose turn it is */
    uint64_t frames;
} fq_t;

static fq_flow_t *fq_find(fq_t *f, uint32_t flow) {
    for (size_t i = 0; i < f->nflows; i++)
        if (f->flows[i].flow == flow) return &f->flows[i];
    return NULL;
}

static fq_flow_t *fq_add_flow(fq_t *f, uint32_t flow, int first) {
    if (f->nflows == f->cap) {
        f->cap = f->cap ? f->cap * 2 : 4;
        f->flows = xrealloc(f->flows, f->cap * sizeof *f->flows);
    }
    /* A new flow joins at the back of the turn (just before the one whose turn it is); one
     * given back goes first (at the turn). */
    size_t at = f->nflows ? f->turn : 0;
    memmove(&f->flows[at + 1], &f->flows[at], (f->nflows - at) * sizeof *f->flows);
    memset(&f->flows[at], 0, sizeof *f->flows);
    f->flows[at].flow = flow;
    f->nflows++;
    if (!first && f->nflows > 1) f->turn = (at + 1) % f->nflows;
    else f->turn = at;
    return &f->flows[at];
}

static void fq_append(fq_t *f, uint32_t flow, uint32_t seq, uint32_t count) {
    fq_flow_t *q = fq_find(f, flow);
    if (!q) q = fq_add_flow(f, flow, 0);
    if (q->q.n) { /* extend a run */
        item_t *last = deq_at(&q->q, q->q.n - 1);
        if (!last->fl && last->seq + last->count == seq) { last->count += count; goto done; }
    }
    deq_push(&q->q, (item_t){.flow = flow, .seq = seq, .count = count});
done:
    q->frames += count;
    f->frames += count;
}

static void fq_push_item(fq_t *f, item_t it) { /* a frame with a payload: never merged into a run */
    fq_flow_t *q = fq_find(f, it.flow);
    if (!q) q = fq_add_flow(f, it.flow, 0);
    deq_push(&q->q, it);
    q->frames++, f->frames++;
}

static item_t fq_pop(fq_t *f) {
    fq_flow_t *q = &f->flows[f->turn];
    item_t *h = deq_at(&q->q, 0), one = *h;
    one.count = 1;
    if (h->count > 1) h->seq++, h->count--;
    else deq_pop(&q->q);
    q->frames--, f->frames--;
    if (!q->frames) {
        free(q->q.v);
        memmove(&f->flows[f->turn], &f->flows[f->turn + 1], (f->nflows - f->turn - 1) * sizeof *f->flows);
        f->nflows--;
        if (f->turn >= f->nflows) f->turn = 0;
    } else {
        f->turn = (f->turn + 1) % f->nflows;
    }
    return one;
}

static void fq_push_front(fq_t *f, item_t it) {
    fq_flow_t *q = fq_find(f, it.flow);
    if (!q) {
        q = fq_add_flow(f, it.flow, 1);
    } else { /* it goes first; the others keep their order */
        size_t qi = (size_t)(q - f->flows), t = f->turn;
        fq_flow_t tmp = *q;
        if (qi > t) {
            memmove(&f->flows[t + 1], &f->flows[t], (qi - t) * sizeof *f->flows);
            f->flows[t] = tmp;
        } else if (qi < t) {
            memmove(&f->flows[qi], &f->flows[qi + 1], (t - 1 - qi) * sizeof *f->flows);
            f->flows[t - 1] = tmp;
            f->turn = t - 1;
        }
        q = &f->flows[f->turn];
    }
    deq_push_front(&q->q, it);
    q->frames++, f->frames++;
}

/* The head frame of ``flow``'s queue, out of turn (the others keep their turn); the caller
 * checks the flow has one. */
static item_t fq_pop_flow(fq_t *f, fq_flow_t *q) {
    size_t i = (size_t)(q - f->flows), t = f->turn;
    size_t n = f->nflows;
    f->turn = i;
    item_t it = fq_pop(f);
    if (f->nflows < n && i < t) t--; /* the flow ran out and left the turn */
    f->turn = f->nflows ? t % f->nflows : 0;
    return it;
}

/* ---- tables: open addressing on a nonzero u64 key, each entry's first field; grown at half full */
typedef struct { char *v; size_t cap, n, elem; } table_t;

static uint64_t entry_key(const table_t *t, size_t j) {
    uint64_t k;
    memcpy(&k, t->v + j * t->elem, sizeof k);
    return k;
}

static size_t tab_slot(const table_t *t, uint64_t key) {
    size_t j = (key * 0x9E3779B97F4A7C15ull) & (t->cap - 1);
    while (entry_key(t, j) && entry_key(t, j) != key) j = (j + 1) & (t->cap - 1);
    return j;
}

/* The entry for ``key`` (zeroed but for its key when new); pointers into the table last until
 * the next tab_get. */
static void *tab_get(table_t *t, uint64_t key, int *fresh) {
    if (2 * (t->n + 1) > t->cap) {
        table_t old = *t;
        t->cap = t->cap ? t->cap * 2 : 256;
        t->v = calloc(t->cap, t->elem);
        if (!t->v) die("out of memory");
        for (size_t i = 0; i < old.cap; i++)
            if (entry_key(&old, i)) memcpy(t->v + tab_slot(t, entry_key(&old, i)) * t->elem, old.v + i * old.elem, t->elem);
        free(old.v);
    }
    size_t j = tab_slot(t, key);
    *fresh = !entry_key(t, j);
    if (*fresh) memcpy(t->v + j * t->elem, &key, sizeof key), t->n++;
    return t->v + j * t->elem;
}

/* ---- received flows: exactly once ---------------------------------------------------------- */
typedef struct {
    uint64_t key;            /* origin << 32 | flow, +1 so 0 is empty */
    uint64_t frames, last_ns, first_ns, relayed, dups;
    uint32_t max_wait;
    uint8_t *seen;           /* one bit per sequence number */
    size_t seen_bytes;
    /* a stream's frames wait here until every earlier one came: pend[i] is seq next + i */
    uint32_t next;
    item_t *pend;
    size_t pend_cap;
    uint64_t bytes_out, ended;
    uint32_t top;            /* bulk: one past the highest sequence number seen (0: none yet) */
    uint64_t top_ns;         /* when that frame came */
} rxflow_t;

/* Where a bulk flow's frames went missing, and when: a frame past ``top`` opens a gap [top, seq),
 * between the arrivals of the frame that set ``top`` (t0; 0: the flow's first) and of this one
 * (t1).  Relayed frames come out of order and fill most gaps later; the final stats count, per
 * gap, the frames still not seen (``bulk_gaps``): a harness puts each loss in the fault whose
 * window holds it (experiments/fault_loss.py).  At most GAP_CAP gaps are kept; more are counted. */
typedef struct { uint16_t origin; uint32_t flow, lo, hi; uint64_t t0, t1; } gap_t;
#define GAP_CAP 65536
#define GAP_SCAN (1u << 28) /* frames the final stats look at in gaps, at most */
#define RELAY_LIST 100000   /* stream frames held for relay the final stats list, at most */
static gap_t *gaps;
static size_t n_gaps;
static uint64_t c_gaps_dropped;

static void note_gap(uint16_t origin, uint32_t flow, uint32_t lo, uint32_t hi, uint64_t t0, uint64_t t1) {
    if (n_gaps == GAP_CAP) { c_gaps_dropped++; return; }
    if (!gaps) gaps = xrealloc(NULL, GAP_CAP * sizeof *gaps);
    gaps[n_gaps++] = (gap_t){origin, flow, lo, hi, t0, t1};
}

static table_t rx = {.elem = sizeof(rxflow_t)};

static rxflow_t *rx_get(uint16_t origin, uint32_t flow) {
    int fresh;
    return tab_get(&rx, ((uint64_t)origin << 32 | flow) + 1, &fresh);
}

/* ---- state -------------------------------------------------------------------------------- */
typedef struct {
    uint32_t id, slot;
    uint16_t rotor, peer;
    uint64_t end_ns, gap_ns, next_ns;
    deq_t out;     /* frames planned for this window, one item per frame */
    size_t sent;
    int open;
} window_t;

static int me, nracks, frame_bytes, ctl = -1, sock = -1;
static struct sockaddr_in peers[MAX_RACKS];
static int have_peer[MAX_RACKS];
static fq_t local_q[MAX_RACKS];
static deq_t relay_q[MAX_RACKS];
static uint64_t relay_held;
static window_t windows[MAX_WINDOWS];
static uint64_t link_gap, link_next;
static uint64_t measure_a, measure_b;
static uint64_t c_direct, c_relay_first, c_relay_second, c_returned, c_sent_frames, c_dup, c_rx;
static uint64_t c_bad_type, c_truncated, c_bad_rack, c_misrouted, c_relay_full, c_send_err, c_bad_ctl;
static uint64_t c_late_add;
static uint64_t c_stream_bytes_in, c_stream_bytes_out, c_pend_full, c_hurried;
static uint64_t spin_max = UINT64_MAX; /* --spin-ns: stay awake this long before a frame is due
                                       * (0: never; not given: a quarter gap, at most SPIN_NS) */
static uint64_t c_windows, c_window_late, c_bad_seq, c_bad_ack, c_injected_loss, lose_every, lose_count;
static uint64_t delivered_from[MAX_RACKS], in_window_from[MAX_RACKS], accepted_total;
static uint64_t relay_delay[DELAY_BUCKETS];
static uint64_t pace_hist[PACE_BUCKETS], pace_max_ns;
/* How long data frames took from their sender's send to here (the frame's sent ns against this
 * host's clock: every Mininet host reads the same kernel clock), 1 us buckets. */
static uint64_t transit_hist[PACE_BUCKETS], transit_max_ns;
/* The host's own flows: the next sequence number, and how its frames went (the agent's flows_tx). */
typedef struct {
    uint64_t key;
    uint32_t flow, next_seq;
    uint64_t first, last, sent, returned, resent;
    uint8_t *acked; /* with retransmission: one bit per sequence number */
    size_t acked_bytes;
} txflow_t;
static table_t tx = {.elem = sizeof(txflow_t)};

static txflow_t *tx_get(uint32_t flow) {
    int fresh;
    txflow_t *t = tab_get(&tx, (uint64_t)flow + 1, &fresh);
    if (fresh) t->flow = flow;
    return t;
}

/* ---- retransmission (host/resend.py's, per frame): own frames in flight, the ACKs owed ----- */
typedef struct { uint32_t flow, seq; uint64_t sent_ns; uint16_t dst; uint8_t fl; uint16_t len; uint8_t *buf; } inflight_t;
typedef struct { inflight_t *v; size_t cap, head, n; } infq_t;
static infq_t inflight;
static uint64_t retransmit_ns;          /* 0: never resend, owe no ACKs */
static int ack_direct, ll_sock = -1;    /* ACKs over the direct circuit, or the low-latency class */
/* --resend-streams-only: only stream frames (FL_PAYLOAD) are kept for resending; a bulk frame is
 * sent once, so it is delivered at most once even to a restarted receiver (whose record of what it
 * had delivered died with it), and a lost one is counted lost. */
static int resend_streams_only;
static uint64_t c_dropped; /* frames of reset connections forgotten (DROP_FLOW) */
typedef struct { uint32_t *v; size_t n, cap; } owed_t; /* flow, seq pairs */
static owed_t owed[MAX_RACKS];
static uint64_t c_resent, c_acks_in, c_acks_out, last_ack_flush, last_resend_scan;

static void bit_set(uint8_t **bits, size_t *bytes, uint32_t seq) {
    size_t byte = seq >> 3;
    if (byte >= *bytes) {
        size_t nb = *bytes ? *bytes : 64;
        while (nb <= byte) nb *= 2;
        *bits = xrealloc(*bits, nb);
        memset(*bits + *bytes, 0, nb - *bytes);
        *bytes = nb;
    }
    (*bits)[byte] |= 1u << (seq & 7);
}

static int bit_get(const uint8_t *bits, size_t bytes, uint32_t seq) {
    return (seq >> 3) < bytes && (bits[seq >> 3] & (1u << (seq & 7)));
}

static void inflight_push(const item_t *it, uint64_t now) {
    infq_t *q = &inflight;
    if (q->n == q->cap) {
        size_t nc = q->cap ? q->cap * 2 : 1024;
        inflight_t *v = xrealloc(NULL, nc * sizeof *v);
        for (size_t i = 0; i < q->n; i++) v[i] = q->v[(q->head + i) & (q->cap - 1)];
        free(q->v);
        q->v = v, q->cap = nc, q->head = 0;
    }
    q->v[(q->head + q->n++) & (q->cap - 1)] = (inflight_t){it->flow, it->seq, now, it->dst, it->fl, it->len, it->buf};
}

static uint64_t unacknowledged(void) {
    uint64_t n = 0;
    for (size_t i = 0; i < inflight.n; i++) {
        inflight_t *e = &inflight.v[(inflight.head + i) & (inflight.cap - 1)];
        txflow_t *t = tx_get(e->flow);
        n += !bit_get(t->acked, t->acked_bytes, e->seq);
    }
    return n;
}

static void owe(uint16_t origin, uint32_t flow, uint32_t seq) {
    owed_t *o = &owed[origin];
    if (o->n + 2 > o->cap) o->cap = o->cap ? 2 * o->cap : 256, o->v = xrealloc(o->v, o->cap * sizeof *o->v);
    o->v[o->n++] = flow, o->v[o->n++] = seq;
}

/* The ACK messages owed to ``origin`` (wire.encode_ack: at most ACK_MAX frames each), sent now. */
#define ACK_MAX 160
static void send_acks(uint16_t origin, int fd) {
    owed_t *o = &owed[origin];
    uint8_t buf[9 + 8 * ACK_MAX];
    for (size_t i = 0; i < o->n;) {
        size_t k = (o->n - i) / 2 < ACK_MAX ? (o->n - i) / 2 : ACK_MAX;
        memset(buf, 0, 7);
        buf[0] = 4;
        buf[7] = k >> 8, buf[8] = k;
        for (size_t j = 0; j < k; j++) {
            uint32_t be[2] = {htonl(o->v[i + 2 * j]), htonl(o->v[i + 2 * j + 1])};
            memcpy(buf + 9 + 8 * j, be, 8);
        }
        if (sendto(fd, buf, 9 + 8 * k, 0, (struct sockaddr *)&peers[origin], sizeof peers[origin]) < 0) c_send_err++;
        else c_acks_out++;
        i += 2 * k;
    }
    o->n = 0;
}

/* Own frames not acknowledged ``retransmit_ns`` after they left go back to the head of their
 * queue (the receiver drops a second copy: exactly once). */
static void resend_overdue(uint64_t now);

/* ---- control ---------------------------------------------------------------------------- */
static void ctl_send(const void *buf, size_t n) {
    if (send(ctl, buf, n, MSG_NOSIGNAL) < 0) exit(0); /* the agent is gone */
}

#define REPLY_MAX (1u << 20)
static void reply(uint32_t req, const void *payload, size_t n) {
    static uint8_t buf[REPLY_MAX];
    if (n + 8 > sizeof buf) die("reply too large");
    uint32_t h[2] = {200, req};
    memcpy(buf, h, 8);
    memcpy(buf + 8, payload, n);
    ctl_send(buf, n + 8);
}

static window_t *win_find(uint32_t id) {
    for (int i = 0; i < MAX_WINDOWS; i++)
        if (windows[i].open && windows[i].id == id) return &windows[i];
    return NULL;
}

static void win_close(window_t *w) {
    uint32_t returned = 0;
    /* what the window could not send goes back to the head of its queue, last first */
    while (w->out.n > w->sent) {
        item_t it = *deq_at(&w->out, w->out.n - 1);
        w->out.n--;
        if (it.relayed) deq_push_front(&relay_q[it.dst], it), relay_held++;
        else fq_push_front(&local_q[it.dst], it), tx_get(it.flow)->returned++;
        returned++;
    }
    c_returned += returned;
    uint32_t ev[4] = {100, w->id, (uint32_t)w->sent, returned};
    free(w->out.v);
    memset(w, 0, sizeof *w);
    ctl_send(ev, sizeof ev);
}

static void state_reply(uint32_t req) {
    static uint8_t buf[1 << 20];
    size_t off = 4;
    uint32_t n = 0;
    for (int d = 0; d < nracks; d++)
        if (local_q[d].frames) {
            uint16_t dst = d, z = 0;
            uint32_t fr = (uint32_t)local_q[d].frames;
            memcpy(buf + off, &dst, 2), memcpy(buf + off + 2, &z, 2), memcpy(buf + off + 4, &fr, 4);
            off += 8, n++;
        }
    memcpy(buf, &n, 4);
    size_t moff = off;
    off += 4;
    uint32_t m = 0;
    for (int d = 0; d < nracks; d++) {
        deq_t *q = &relay_q[d];
        for (size_t i = 0; i < q->n;) {
            item_t *a = deq_at(q, i);
            uint32_t cnt = 0;
            size_t j = i;
            while (j < q->n && deq_at(q, j)->origin == a->origin && deq_at(q, j)->acc == a->acc) j++, cnt++;
            if (off + 12 > sizeof buf - 8) die("state too large");
            uint16_t dst = d, org = a->origin;
            memcpy(buf + off, &dst, 2), memcpy(buf + off + 2, &org, 2);
            memcpy(buf + off + 4, &a->acc, 4), memcpy(buf + off + 8, &cnt, 4);
            off += 12, m++;
            i = j;
        }
    }
    memcpy(buf + moff, &m, 4);
    reply(req, buf, off);
}

/* An own frame for rack d into window w, stamped with the window's slot (the relay's accept slot). */
static void win_push_own(window_t *w, item_t it, uint16_t d) {
    it.origin = me, it.dst = d, it.relayed = 0, it.acc = w->slot;
    deq_push(&w->out, it);
}

static uint32_t win_add(window_t *w, int kind, uint16_t dst, uint32_t n) {
    uint32_t moved = 0;
    if (kind == 0) {
        deq_t *q = &relay_q[w->peer];
        while (moved < n && q->n) {
            item_t it = deq_pop(q);
            relay_held--;
            deq_push(&w->out, it);
            moved++;
        }
        c_relay_second += moved;
    } else {
        uint16_t d = kind == 1 ? w->peer : dst;
        if (d >= nracks) return 0;
        fq_t *f = &local_q[d];
        while (moved < n && f->frames) {
            win_push_own(w, fq_pop(f), d);
            moved++;
        }
        if (kind == 1) c_direct += moved;
        else c_relay_first += moved;
    }
    return moved;
}

/* Up to ``most`` frames of one own flow below ``below`` into window w, ahead of what it has not sent yet: a
 * short stream write that the agent hurries (host/fast_agent.py: hurry).  *left: that flow's
 * frames below ``below`` still queued (none: nothing more to hurry). */
static uint32_t win_add_flow(window_t *w, int kind, uint16_t dst, uint32_t flow, uint32_t below, uint32_t most,
                             uint32_t *left) {
    uint16_t d = kind == 1 ? w->peer : dst;
    uint32_t moved = 0;
    *left = 0;
    if (d >= nracks || d == me) return 0;
    fq_t *f = &local_q[d];
    fq_flow_t *q;
    while (moved < most && (q = fq_find(f, flow)) && q->q.n && deq_at(&q->q, 0)->seq < below) {
        win_push_own(w, fq_pop_flow(f, q), d);
        for (size_t j = w->out.n - 1; j > w->sent + moved; j--) { /* ahead of the unsent */
            item_t tmp = *deq_at(&w->out, j);
            *deq_at(&w->out, j) = *deq_at(&w->out, j - 1);
            *deq_at(&w->out, j - 1) = tmp;
        }
        moved++;
    }
    if ((q = fq_find(f, flow)))
        for (size_t j = 0; j < q->q.n; j++) {
            item_t *it = deq_at(&q->q, j);
            if (it->seq < below) *left += it->count;
        }
    if (kind == 1) c_direct += moved;
    else c_relay_first += moved;
    c_hurried += moved;
    return moved;
}

static char *json;
static size_t json_n, json_cap;
static void jp(const char *fmt, ...) {
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int k = vsnprintf(json + json_n, json_cap - json_n, fmt, ap);
        va_end(ap);
        if ((size_t)k < json_cap - json_n) { json_n += k; return; }
        json_cap = json_cap ? json_cap * 2 : 1 << 16;
        json = xrealloc(json, json_cap);
    }
}

/* The nonzero counts of ``v`` as JSON members "index": count. */
static void jp_counts(const uint64_t *v, int n) {
    int first = 1;
    for (int i = 0; i < n; i++)
        if (v[i]) jp("%s\"%d\":%lu", first ? "" : ",", i, v[i]), first = 0;
}

static uint64_t pct(const uint64_t *hist, double p) {
    uint64_t total = 0, acc = 0;
    for (int i = 0; i < PACE_BUCKETS; i++) total += hist[i];
    if (!total) return 0;
    for (int i = 0; i < PACE_BUCKETS; i++)
        if ((acc += hist[i]) >= p * total) return i;
    return PACE_BUCKETS - 1;
}

static void stats_reply(uint32_t req, const char *path, int with_gaps) {
    json_n = 0;
    uint64_t held_local = 0;
    for (int d = 0; d < nracks; d++) held_local += local_q[d].frames;
    jp("{\"sent\":{\"direct\":%lu,\"relay_first\":%lu,\"relay_second\":%lu,\"unsent_returned\":%lu,\"frames\":%lu},",
       c_direct, c_relay_first, c_relay_second, c_returned, c_sent_frames);
    jp("\"stream_bytes\":{\"in\":%lu,\"out\":%lu,\"waiting_beyond_a_million\":%lu},", c_stream_bytes_in,
       c_stream_bytes_out, c_pend_full);
    jp("\"stream_frames_dropped\":%lu,\"hurried\":%lu,", c_dropped, c_hurried);
    jp("\"retransmitted\":%lu,\"unacknowledged\":%lu,\"acks_in\":%lu,\"acks_out\":%lu,", c_resent,
       retransmit_ns ? unacknowledged() : 0, c_acks_in, c_acks_out);
    jp("\"late_adds\":%lu,\"now_ns\":%lu,", c_late_add, wall_ns()); /* when these counts were taken */
    jp("\"received\":%lu,\"duplicates\":%lu,\"held_local\":%lu,\"windows\":%lu,\"windows_opened_late\":%lu,",
       c_rx, c_dup, held_local, c_windows, c_window_late);
    jp("\"refused\":{\"bad_type\":%lu,\"truncated\":%lu,\"bad_rack\":%lu,\"misrouted\":%lu,\"relay_full\":%lu,"
       "\"send_error\":%lu,\"bad_control\":%lu,\"bad_seq\":%lu,\"bad_ack\":%lu},\"injected_loss\":%lu,",
       c_bad_type, c_truncated, c_bad_rack, c_misrouted, c_relay_full, c_send_err, c_bad_ctl, c_bad_seq, c_bad_ack,
       c_injected_loss);
    jp("\"pacing_error_us\":{\"p50\":%lu,\"p99\":%lu,\"p999\":%lu,\"max\":%.1f,\"frames\":%lu},", pct(pace_hist, 0.5),
       pct(pace_hist, 0.99), pct(pace_hist, 0.999), pace_max_ns / 1e3, c_sent_frames);
    jp("\"transit_us\":{\"p50\":%lu,\"p99\":%lu,\"p999\":%lu,\"max\":%.1f},", pct(transit_hist, 0.5),
       pct(transit_hist, 0.99), pct(transit_hist, 0.999), transit_max_ns / 1e3);
    jp("\"held_relay\":{");
    int first = 1;
    for (int d = 0; d < nracks; d++)
        if (relay_q[d].n) jp("%s\"%d\":%zu", first ? "" : ",", d, relay_q[d].n), first = 0;
    jp("},\"held_relay_by_origin\":{");
    static uint64_t by_origin[MAX_RACKS];
    memset(by_origin, 0, sizeof by_origin);
    for (int d = 0; d < nracks; d++)
        for (size_t i = 0; i < relay_q[d].n; i++) by_origin[deq_at(&relay_q[d], i)->origin]++;
    jp_counts(by_origin, nracks);
    /* the same without stream frames (they carry a payload), and own frames held per destination:flow: a
     * harness tells bulk from streams by them (experiments/faults_load.py) */
    jp("},\"held_relay_bulk_by_origin\":{");
    memset(by_origin, 0, sizeof by_origin);
    for (int d = 0; d < nracks; d++)
        for (size_t i = 0; i < relay_q[d].n; i++)
            if (!(deq_at(&relay_q[d], i)->fl & FL_PAYLOAD)) by_origin[deq_at(&relay_q[d], i)->origin]++;
    jp_counts(by_origin, nracks);
    jp("},\"held_local_by_flow\":{");
    first = 1;
    for (int d = 0; d < nracks; d++)
        for (size_t i = 0; i < local_q[d].nflows; i++)
            if (local_q[d].flows[i].frames)
                jp("%s\"%d:%u\":%lu", first ? "" : ",", d, local_q[d].flows[i].flow, local_q[d].flows[i].frames),
                    first = 0;
    jp("},\"delivered\":{");
    jp_counts(delivered_from, nracks);
    jp("},\"delivered_in_window\":{");
    jp_counts(in_window_from, nracks);
    jp("},\"relay_delay_slots\":{");
    jp_counts(relay_delay, DELAY_BUCKETS);
    jp("},\"flows_rx\":{");
    first = 1;
    for (size_t i = 0; i < rx.cap; i++)
        if (entry_key(&rx, i)) {
            rxflow_t *e = (rxflow_t *)rx.v + i;
            uint64_t k = e->key - 1;
            jp("%s\"%lu:%lu\":[%lu,%lu]", first ? "" : ",", k >> 32, k & 0xffffffffu, e->frames, e->last_ns);
            first = 0;
        }
    jp("},\"flows_rx_via\":{");
    first = 1;
    for (size_t i = 0; i < rx.cap; i++)
        if (entry_key(&rx, i)) {
            rxflow_t *e = (rxflow_t *)rx.v + i;
            uint64_t k = e->key - 1;
            jp("%s\"%lu:%lu\":[%lu,%u,%lu,%lu]", first ? "" : ",", k >> 32, k & 0xffffffffu, e->relayed,
               e->max_wait, e->first_ns, e->dups);
            first = 0;
        }
    /* The gaps still missing frames: asked for by the final stats only (op 10), since the scan is
     * as long as the gaps (bounded: GAP_SCAN frames looked at, the gaps past it counted). */
    jp("},\"bulk_gaps\":[");
    first = 1;
    uint64_t scanned = 0, unscanned = 0;
    for (size_t i = 0; with_gaps && i < n_gaps; i++) {
        gap_t *g = gaps + i;
        if (scanned + (g->hi - g->lo) > GAP_SCAN) { unscanned++; continue; }
        scanned += g->hi - g->lo;
        rxflow_t *e = rx_get(g->origin, g->flow);
        uint64_t lost = 0;
        for (uint32_t q = g->lo; q < g->hi; q++) lost += !bit_get(e->seen, e->seen_bytes, q);
        if (lost) jp("%s[%u,%u,%lu,%lu,%lu]", first ? "" : ",", g->origin, g->flow, lost, g->t0, g->t1), first = 0;
    }
    jp("],\"bulk_gaps_dropped\":%lu,", c_gaps_dropped + unscanned);
    /* Stream frames held here for relay, and how far each stream was handed over here in order:
     * a held frame its origin resent and its receiver already has is a copy, not a frame held
     * (fabric/agents.py: account).  Final stats only, at most RELAY_LIST of them (more: counted). */
    jp("\"held_relay_streams\":[");
    first = 1;
    uint64_t listed = 0, unlisted = 0;
    for (int d = 0; with_gaps && d < nracks; d++)
        for (size_t i = 0; i < relay_q[d].n; i++) {
            item_t *it = deq_at(&relay_q[d], i);
            if (!(it->fl & FL_PAYLOAD)) continue;
            if (listed++ >= RELAY_LIST) { unlisted++; continue; }
            jp("%s[%u,%u,%u,%u]", first ? "" : ",", it->origin, it->dst, it->flow, it->seq), first = 0;
        }
    jp("],\"held_relay_streams_unlisted\":%lu,\"rx_stream_next\":{", unlisted);
    first = 1;
    for (size_t i = 0; with_gaps && i < rx.cap; i++)
        if (entry_key(&rx, i) && ((rxflow_t *)rx.v)[i].next) {
            rxflow_t *e = (rxflow_t *)rx.v + i;
            uint64_t k = e->key - 1;
            jp("%s\"%lu:%lu\":%u", first ? "" : ",", k >> 32, k & 0xffffffffu, e->next), first = 0;
        }
    jp("},");
    jp("\"flows_tx\":{");
    first = 1;
    for (size_t i = 0; i < tx.cap; i++)
        if (entry_key(&tx, i) && ((txflow_t *)tx.v)[i].sent) {
            txflow_t *t = (txflow_t *)tx.v + i;
            jp("%s\"%u\":[%lu,%lu,%lu,%lu,%lu]", first ? "" : ",", t->flow, t->first, t->last, t->sent, t->resent,
               t->returned);
            first = 0;
        }
    jp("},\"accepted\":{");
    first = 1;
    for (size_t i = 0; i < tx.cap; i++) {
        txflow_t *t = (txflow_t *)tx.v + i;
        if (entry_key(&tx, i) && t->next_seq) jp("%s\"%u\":%u", first ? "" : ",", t->flow, t->next_seq), first = 0;
    }
    jp("}}");
    /* written aside and renamed: whoever reads the file sees it whole */
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%.4095s.tmp", path);
    FILE *fp = fopen(tmp, "w");
    uint32_t ok = fp && fwrite(json, 1, json_n, fp) == json_n;
    if (fp && fclose(fp) != 0) ok = 0;
    if (ok && rename(tmp, path) != 0) ok = 0;
    reply(req, &ok, 4);
}

static void handle_ctl(const uint8_t *m, ssize_t n) {
    if (n < 8) { c_bad_ctl++; return; }
    uint8_t op = m[0];
    uint32_t req;
    memcpy(&req, m + 4, 4);
    const uint8_t *p = m + 8;
    if (op == 1 && n >= 20) {
        uint16_t dst;
        uint32_t flow, cnt;
        memcpy(&dst, p, 2), memcpy(&flow, p + 4, 4), memcpy(&cnt, p + 8, 4);
        if (dst >= nracks || dst == me || !cnt) { c_bad_ctl++; return; }
        txflow_t *t = tx_get(flow);
        fq_append(&local_q[dst], flow, t->next_seq, cnt);
        t->next_seq += cnt;
        accepted_total += cnt;
    } else if (op == 2) {
        state_reply(req);
    } else if (op == 3 && n >= 40) {
        window_t *w = NULL;
        for (int i = 0; i < MAX_WINDOWS && !w; i++)
            if (!windows[i].open) w = &windows[i];
        if (!w) die("more than %d circuit windows open at once", MAX_WINDOWS);
        memset(w, 0, sizeof *w);
        memcpy(&w->id, p, 4), memcpy(&w->rotor, p + 4, 2), memcpy(&w->peer, p + 6, 2), memcpy(&w->slot, p + 8, 4);
        memcpy(&w->end_ns, p + 16, 8), memcpy(&w->gap_ns, p + 24, 8);
        if (w->peer >= nracks || !have_peer[w->peer]) { c_bad_ctl++; return; }
        w->open = 1;
        w->next_ns = wall_ns();
        if (retransmit_ns && ack_direct) send_acks(w->peer, sock);
        c_windows++;
        if (w->next_ns >= w->end_ns) c_window_late++;
    } else if (op == 4 && n >= 20) {
        uint32_t id, cnt, moved = 0;
        uint16_t dst;
        memcpy(&id, p, 4), memcpy(&dst, p + 6, 2), memcpy(&cnt, p + 8, 4);
        window_t *w = win_find(id);
        if (w && p[4] <= 2) moved = win_add(w, p[4], dst, cnt);
        else if (!w) c_late_add++; /* the window ended before the agent's frames came: nothing moved */
        else c_bad_ctl++;
        reply(req, &moved, 4);
    } else if ((op == 5 || op == 10) && n > 8 && n < 4096 + 8 && m[n - 1] == 0) {
        stats_reply(req, (const char *)p, op == 10);
    } else if (op == 6 && n >= 16) {
        memcpy(&link_gap, p, 8);
    } else if (op == 8 && n >= 16) {
        uint16_t dst;
        uint32_t flow;
        memcpy(&dst, p, 2), memcpy(&flow, p + 4, 4);
        int fin = p[2];
        uint32_t queued = 0, next = 0;
        if (dst >= nracks || dst == me) {
            c_bad_ctl++;
        } else {
            txflow_t *t = tx_get(flow);
            const uint8_t *data = p + 8;
            size_t len = (size_t)(n - 16), chunk = (size_t)frame_bytes - HEAD;
            for (size_t o = 0; o < len || (fin && o == len); o += chunk) {
                size_t k = len - o < chunk ? len - o : chunk;
                item_t it = {.flow = flow, .seq = t->next_seq++, .count = 1, .fl = FL_PAYLOAD, .len = (uint16_t)k};
                if (fin && o + k >= len) it.fl |= FL_FIN;
                it.buf = xrealloc(NULL, k ? k : 1);
                memcpy(it.buf, data + o, k);
                fq_push_item(&local_q[dst], it);
                t = tx_get(flow); /* (no rehash here, but cheap) */
                accepted_total++;
                if (fin && o + k >= len) break;
                if (k == 0) break;
            }
            queued = (uint32_t)local_q[dst].frames;
            next = t->next_seq;
        }
        uint32_t r8[2] = {queued, next};
        reply(req, r8, 8);
    } else if (op == 9 && n >= 16) {
        uint16_t dst;
        uint32_t flow, dropped = 0;
        memcpy(&dst, p, 2), memcpy(&flow, p + 4, 4);
        if (dst >= nracks || dst == me) {
            c_bad_ctl++;
        } else {
            fq_t *f = &local_q[dst];
            for (size_t i = 0; i < f->nflows; i++) {
                if (f->flows[i].flow != flow) continue;
                fq_flow_t *q = &f->flows[i];
                for (size_t j = 0; j < q->q.n; j++) free(deq_at(&q->q, j)->buf);
                dropped += (uint32_t)q->frames;
                f->frames -= q->frames;
                free(q->q.v);
                memmove(&f->flows[i], &f->flows[i + 1], (f->nflows - i - 1) * sizeof *f->flows);
                f->nflows--;
                if (f->turn > i) f->turn--;
                if (f->turn >= f->nflows) f->turn = 0;
                break;
            }
            txflow_t *t = tx_get(flow);
            if (retransmit_ns) /* sent and not acknowledged: taken as acknowledged, never resent */
                for (size_t k = 0; k < inflight.n; k++) {
                    inflight_t *e = &inflight.v[(inflight.head + k) & (inflight.cap - 1)];
                    if (e->flow == flow && e->dst == dst && !bit_get(t->acked, t->acked_bytes, e->seq))
                        bit_set(&t->acked, &t->acked_bytes, e->seq), dropped++;
                }
            c_dropped += dropped;
        }
        reply(req, &dropped, 4);
    } else if (op == 11 && n >= 28) {
        uint32_t id, flow, below, most, r11[2] = {0, 0};
        uint16_t dst;
        memcpy(&id, p, 4), memcpy(&dst, p + 6, 2), memcpy(&flow, p + 8, 4), memcpy(&below, p + 12, 4);
        memcpy(&most, p + 16, 4);
        window_t *w = win_find(id);
        if (w && (p[4] == 1 || p[4] == 2)) r11[0] = win_add_flow(w, p[4], dst, flow, below, most, &r11[1]);
        else if (!w) c_late_add++;
        else c_bad_ctl++;
        reply(req, r11, 8);
    } else if (op == 7) {
        exit(0);
    } else {
        c_bad_ctl++;
    }
}

/* ---- streams: bytes in order to the agent ------------------------------------------------- */
#define EV_MAX 65536

/* Hand the agent what flow (origin, flow) has in order from ``f->next`` on: DELIVER events
 * (101: u16 origin, u8 fin, u8 0, u32 flow, u32 bytes, the bytes), up to EV_MAX bytes each. */
static item_t *pend_at(rxflow_t *f, size_t i) { return &f->pend[(f->next + i) & (f->pend_cap - 1)]; }

static void flush_stream(rxflow_t *f, uint16_t origin, uint32_t flow) {
    static uint8_t ev[16 + EV_MAX];
    for (;;) {
        size_t off = 16;
        int fin = 0;
        while (f->pend_cap && pend_at(f, 0)->fl) {
            item_t *it = pend_at(f, 0);
            if (off + it->len > sizeof ev) break;
            memcpy(ev + off, it->buf, it->len);
            off += it->len;
            fin = it->fl & FL_FIN;
            free(it->buf);
            memset(it, 0, sizeof *it);
            f->next++;
            if (fin) { f->ended = 1; break; }
        }
        if (off == 16 && !fin) return;
        uint32_t h[4] = {101, 0, flow, (uint32_t)(off - 16)};
        memcpy(ev, h, 16);
        memcpy(ev + 4, &origin, 2);
        ev[6] = (uint8_t)(fin != 0);
        ev[7] = 0;
        c_stream_bytes_out += off - 16;
        f->bytes_out += off - 16;
        ctl_send(ev, off);
        if (fin || !f->pend_cap || !pend_at(f, 0)->fl) return;
    }
}

/* Frame ``seq`` of a stream: kept until every earlier frame came, then handed over in order. */
static void deliver_in_order(rxflow_t *f, uint16_t origin, uint32_t flow, uint32_t seq, const uint8_t *p,
                             ssize_t len, int fin) {
    if (seq < f->next || f->ended) return; /* before what was handed over: cannot be (dedup), kept safe */
    size_t i = seq - f->next;
    if (i >= (1u << 20)) { c_pend_full++; return; } /* a million frames ahead of a gap: refused, counted */
    if (i >= f->pend_cap) { /* a ring indexed by seq: grown to a power of two, laid out again */
        size_t nc = f->pend_cap ? f->pend_cap : 64;
        while (nc <= i) nc *= 2;
        item_t *v = calloc(nc, sizeof *v);
        if (!v) die("out of memory");
        for (size_t j = 0; j < f->pend_cap; j++) v[(f->next + j) & (nc - 1)] = *pend_at(f, j);
        free(f->pend);
        f->pend = v, f->pend_cap = nc;
    }
    item_t *it = pend_at(f, i);
    it->fl = FL_PAYLOAD | (fin ? FL_FIN : 0);
    it->len = (uint16_t)len;
    it->buf = xrealloc(NULL, len ? (size_t)len : 1);
    memcpy(it->buf, p, (size_t)len);
    c_stream_bytes_in += (uint64_t)len;
    if (i == 0) flush_stream(f, origin, flow);
}

/* ---- receive ------------------------------------------------------------------------------ */
static uint32_t rd32(const uint8_t *b) { return (uint32_t)b[0] << 24 | b[1] << 16 | b[2] << 8 | b[3]; }
static uint16_t rd16(const uint8_t *b) { return (uint16_t)(b[0] << 8 | b[1]); }

static void received(const uint8_t *b, ssize_t n, uint64_t now) {
    c_rx++;
    if (n >= 1 && b[0] == 4) { /* ACK: frames of ours delivered */
        if (n < 9) { c_truncated++; return; }
        size_t k = rd16(b + 7);
        if ((size_t)n < 9 + 8 * k) { c_truncated++; return; }
        c_acks_in++;
        for (size_t j = 0; j < k; j++) {
            txflow_t *t = tx_get(rd32(b + 9 + 8 * j));
            uint32_t seq = rd32(b + 13 + 8 * j);
            if (seq >= t->next_seq) c_bad_ack++; /* not a frame this host made */
            else bit_set(&t->acked, &t->acked_bytes, seq);
        }
        return;
    }
    if (n < 1 || b[0] != 3) { c_bad_type++; return; }
    if (n < HEAD) { c_truncated++; return; }
    uint32_t slot = rd32(b + 3);
    uint16_t origin = rd16(b + 7), dst = rd16(b + 17);
    uint32_t flow = rd32(b + 9), seq = rd32(b + 13), acc = rd32(b + 20);
    uint8_t flags = b[19];
    uint64_t sent_ns = 0;
    for (int i = 0; i < 8; i++) sent_ns = sent_ns << 8 | b[24 + i];
    if (sent_ns && sent_ns <= now) { /* one hop: to the relay, or from it */
        uint64_t t = now - sent_ns;
        transit_hist[t / 1000 < PACE_BUCKETS ? t / 1000 : PACE_BUCKETS - 1]++;
        if (t > transit_max_ns) transit_max_ns = t;
    }
    if (origin >= nracks || dst >= nracks || origin == dst) { c_bad_rack++; return; }
    if (dst != me) {
        if (flags & 1) { c_misrouted++; return; } /* a second hop must end here */
        if (relay_held >= RELAY_CAP) { c_relay_full++; return; }
        item_t it = {.flow = flow, .seq = seq, .count = 1, .acc = slot, .origin = origin, .dst = dst, .relayed = 1,
                     .fl = flags & (FL_PAYLOAD | FL_FIN)};
        if (flags & FL_PAYLOAD) {
            if (n - HEAD > frame_bytes - HEAD) { c_truncated++; return; } /* longer than a frame: not ours */
            it.len = (uint16_t)(n - HEAD);
            it.buf = xrealloc(NULL, it.len ? it.len : 1);
            memcpy(it.buf, b + HEAD, it.len);
        }
        deq_push(&relay_q[dst], it);
        relay_held++;
        return;
    }
    if (seq >= MAX_SEQ) { c_bad_seq++; return; }
    rxflow_t *f = rx_get(origin, flow);
    if (!f->first_ns) f->first_ns = now;
    if (retransmit_ns) owe(origin, flow, seq); /* a duplicate too: its first ACK may have been lost */
    size_t byte = seq >> 3;
    if (byte >= f->seen_bytes) {
        size_t nb = f->seen_bytes ? f->seen_bytes : 64;
        while (nb <= byte) nb *= 2;
        f->seen = xrealloc(f->seen, nb);
        memset(f->seen + f->seen_bytes, 0, nb - f->seen_bytes);
        f->seen_bytes = nb;
    }
    if (f->seen[byte] & (1u << (seq & 7))) { c_dup++, f->dups++; return; }
    f->seen[byte] |= 1u << (seq & 7);
    f->frames++, f->last_ns = now;
    if (!(flags & FL_PAYLOAD) && seq >= f->top) {
        if (seq > f->top) note_gap(origin, flow, f->top, seq, f->top ? f->top_ns : 0, now);
        f->top = seq + 1, f->top_ns = now;
    }
    delivered_from[origin]++;
    if (measure_a <= now && now < measure_b) in_window_from[origin]++;
    if (flags & FL_PAYLOAD) deliver_in_order(f, origin, flow, seq, b + HEAD, n - HEAD, flags & FL_FIN);
    if (flags & 1) {
        uint32_t wait = slot - acc;
        relay_delay[wait < DELAY_BUCKETS ? wait : DELAY_BUCKETS - 1]++;
        f->relayed++;
        if (wait > f->max_wait) f->max_wait = wait;
    }
}

/* ---- send --------------------------------------------------------------------------------- */
static uint8_t txbuf[BATCH][MAX_FRAME];
static struct iovec txiov[BATCH];
static struct mmsghdr txmsg[BATCH];

static void fill(uint8_t *b, const window_t *w, const item_t *it, uint64_t now) {
    b[0] = 3;
    b[1] = w->rotor >> 8, b[2] = w->rotor;
    uint32_t v[] = {w->slot, it->flow, it->seq, it->acc};
    uint32_t be[4];
    for (int i = 0; i < 4; i++) be[i] = htonl(v[i]);
    memcpy(b + 3, &be[0], 4);
    b[7] = it->origin >> 8, b[8] = it->origin;
    memcpy(b + 9, &be[1], 4), memcpy(b + 13, &be[2], 4);
    b[17] = it->dst >> 8, b[18] = it->dst;
    b[19] = it->relayed | it->fl;
    if (it->fl & FL_PAYLOAD) memcpy(b + HEAD, it->buf, it->len);
    memcpy(b + 20, &be[3], 4);
    uint64_t t = now;
    for (int i = 0; i < 8; i++) b[24 + i] = t >> (56 - 8 * i);
}

/* Send what window w owes by now; returns the wall ns its next frame is due (0: nothing queued). */
static uint64_t pace(window_t *w, uint64_t now) {
    int k = 0, m = 0; /* frames sent, datagrams made (fewer with --lose-every) */
    if (w->sent >= w->out.n) { /* idle: its next frame paces from when it comes, no burst after */
        if (w->next_ns < now) w->next_ns = now;
        return 0;
    }
    while (w->sent + k < w->out.n && k < BATCH) {
        uint64_t due = w->next_ns > link_next ? w->next_ns : link_next;
        if (due > now) break;
        item_t *it = deq_at(&w->out, w->sent + k);
        if (lose_every && ++lose_count % lose_every == 0) {
            c_injected_loss++; /* tests: a frame the fabric lost */
        } else {
            txiov[m].iov_len = it->fl & FL_PAYLOAD ? (size_t)HEAD + it->len : (size_t)frame_bytes;
            fill(txbuf[m++], w, it, now);
        }
        uint64_t err = now - due;
        pace_hist[err / 1000 < PACE_BUCKETS ? err / 1000 : PACE_BUCKETS - 1]++;
        if (err > pace_max_ns) pace_max_ns = err;
        /* Behind?  Up to 1.2x faster, so the window's frames still leave inside it (host/window.py:
         * CATCH_UP); after a stall, what fell due in the last BURST_NS (at least two frames) at once,
         * the rest of the stall is lost time. */
        size_t left = w->out.n - w->sent - k - 1;
        uint64_t g = w->gap_ns;
        if (left) {
            uint64_t fit = now < w->end_ns ? (w->end_ns - now) / (left + 1) : 0;
            uint64_t fast = (uint64_t)(w->gap_ns / 1.2);
            g = fit < g ? (fit > fast ? fit : fast) : g;
        }
        uint64_t owed = 2 * g > BURST_NS ? 2 * g : BURST_NS;
        w->next_ns = w->next_ns + g > now - owed ? w->next_ns + g : now - owed;
        if (link_gap) link_next = link_next + link_gap > now - link_gap ? link_next + link_gap : now - link_gap;
        k++;
    }
    if (k) {
        int done = 0;
        while (done < m) {
            int r = sendmmsg(sock, txmsg + done, m - done, 0);
            if (r < 0) {
                if (errno == EINTR) continue;
                c_send_err += m - done; /* counted: the frames are gone */
                break;
            }
            done += r;
        }
        for (int i = 0; i < k; i++) {
            item_t *it = deq_at(&w->out, w->sent + i);
            if (it->origin == me && !it->relayed) {
                txflow_t *t = tx_get(it->flow);
                if (!t->first) t->first = now;
                t->last = now, t->sent++;
                if (retransmit_ns && (!resend_streams_only || (it->fl & FL_PAYLOAD))) {
                    inflight_push(it, now); it->buf = NULL; /* kept until acknowledged */
                }
            }
            free(it->buf); /* sent: a relayed copy, or no retransmission */
            it->buf = NULL;
        }
        w->sent += k, c_sent_frames += k;
    }
    if (w->sent >= w->out.n) return 0;
    return w->next_ns > link_next ? w->next_ns : link_next;
}

static void resend_overdue(uint64_t now) {
    while (inflight.n) {
        inflight_t *e = &inflight.v[inflight.head];
        if (e->sent_ns + retransmit_ns >= now) break;
        txflow_t *t = tx_get(e->flow);
        if (!bit_get(t->acked, t->acked_bytes, e->seq)) {
            fq_push_front(&local_q[e->dst], (item_t){.flow = e->flow, .seq = e->seq, .count = 1, .fl = e->fl,
                                                     .len = e->len, .buf = e->buf});
            c_resent++, t->resent++;
        } else {
            free(e->buf);
        }
        inflight.head = (inflight.head + 1) & (inflight.cap - 1);
        inflight.n--;
    }
}

static void on_signal(int s) { (void)s; _exit(0); }

int main(int argc, char **argv) {
    const char *bind_addr = "0.0.0.0";
    int port = 9978, tos = 8 << 2, ll_tos = 46 << 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define ARG(name) (!strcmp(a, name) && v && ++i)
        if (ARG("--rack")) me = atoi(v);
        else if (ARG("--racks")) nracks = atoi(v);
        else if (ARG("--frame")) frame_bytes = atoi(v);
        else if (ARG("--ctl")) ctl = atoi(v);
        else if (ARG("--bind")) bind_addr = v;
        else if (ARG("--port")) port = atoi(v);
        else if (ARG("--tos")) tos = atoi(v);
        else if (ARG("--measure")) sscanf(v, "%lu,%lu", &measure_a, &measure_b);
        else if (ARG("--retransmit-ns")) retransmit_ns = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--ack-direct")) ack_direct = 1;
        else if (!strcmp(a, "--resend-streams-only")) resend_streams_only = 1;
        else if (ARG("--spin-ns")) spin_max = strtoull(v, NULL, 10);
        else if (ARG("--lose-every")) lose_every = strtoull(v, NULL, 10); /* tests only */
        else if (ARG("--ll-tos")) ll_tos = atoi(v);
        else if (ARG("--peer")) {
            int r, pp;
            char ip[64];
            if (sscanf(v, "%d=%63[^:]:%d", &r, ip, &pp) != 3 || r < 0 || r >= MAX_RACKS) die("bad --peer %s", v);
            peers[r].sin_family = AF_INET, peers[r].sin_port = htons(pp);
            if (inet_pton(AF_INET, ip, &peers[r].sin_addr) != 1) die("bad --peer address %s", ip);
            have_peer[r] = 1;
        } else die("unknown argument %s", a);
    }
    if (nracks < 2 || nracks > MAX_RACKS || me < 0 || me >= nracks) die("--rack and --racks (2..%d) needed", MAX_RACKS);
    if (frame_bytes < HEAD || frame_bytes > MAX_FRAME) die("--frame must be %d..%d bytes", HEAD, MAX_FRAME);
    if (ctl < 0) die("--ctl FD needed");
    signal(SIGTERM, on_signal);
    signal(SIGINT, SIG_IGN); /* the agent decides when to stop (Ctrl-C reaches both) */
    prctl(PR_SET_TIMERSLACK, 1000UL); /* 1 us: frames are paced by the sleep */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    sock = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    int big = 16 << 20;
    setsockopt(sock, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    setsockopt(sock, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    setsockopt(sock, IPPROTO_IP, IP_TOS, &tos, sizeof tos);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    if (inet_pton(AF_INET, bind_addr, &sa.sin_addr) != 1) die("bad --bind %s", bind_addr);
    if (bind(sock, (struct sockaddr *)&sa, sizeof sa) < 0) die("bind %s:%d: %s", bind_addr, port, strerror(errno));
    if (retransmit_ns && !ack_direct) { /* ACKs ride the low-latency class */
        ll_sock = socket(AF_INET, SOCK_DGRAM, 0);
        setsockopt(ll_sock, IPPROTO_IP, IP_TOS, &ll_tos, sizeof ll_tos);
        struct sockaddr_in la = sa;
        la.sin_port = 0;
        if (bind(ll_sock, (struct sockaddr *)&la, sizeof la) < 0) die("bind %s: %s", bind_addr, strerror(errno));
    }
    for (int i = 0; i < BATCH; i++) {
        txiov[i] = (struct iovec){txbuf[i], (size_t)frame_bytes};
        txmsg[i].msg_hdr = (struct msghdr){.msg_iov = &txiov[i], .msg_iovlen = 1, .msg_namelen = sizeof peers[0]};
    }
    static uint8_t rxbuf[BATCH][MAX_FRAME + 64], cbuf[65536];
    struct iovec rxiov[BATCH];
    struct mmsghdr rxmsg[BATCH];
    for (int i = 0; i < BATCH; i++) {
        rxiov[i] = (struct iovec){rxbuf[i], sizeof rxbuf[i]};
        rxmsg[i].msg_hdr = (struct msghdr){.msg_iov = &rxiov[i], .msg_iovlen = 1};
    }
    uint32_t ready = 300; /* tells the agent the socket is bound */
    ctl_send(&ready, 4);
    uint64_t last_io = 0;
    int woke = 1;
    for (;;) {
        uint64_t now = wall_ns();
        /* The sockets are read after every sleep and, while spinning for the next frame's time,
         * every IO_EVERY_NS: two syscalls per frame sent would halve the rate. */
        if (woke || now - last_io >= IO_EVERY_NS) {
            ssize_t n;
            while ((n = recv(ctl, cbuf, sizeof cbuf, MSG_DONTWAIT)) > 0) handle_ctl(cbuf, n);
            if (n == 0) return 0; /* the agent closed its end */
            int r, rounds = 0;
            while (rounds++ < 16 && (r = recvmmsg(sock, rxmsg, BATCH, MSG_DONTWAIT, NULL)) > 0) {
                now = wall_ns();
                for (int i = 0; i < r; i++) received(rxbuf[i], rxmsg[i].msg_len, now);
            }
            last_io = now = wall_ns();
            woke = 0;
        }
        if (retransmit_ns && now - last_resend_scan >= 50000000ull) { /* every 50 ms */
            resend_overdue(now);
            last_resend_scan = now;
        }
        if (retransmit_ns && !ack_direct && now - last_ack_flush >= 20000000ull) { /* every 20 ms */
            for (int o = 0; o < nracks; o++)
                if (owed[o].n) send_acks(o, ll_sock);
            last_ack_flush = now;
        }
        uint64_t wake = now + (retransmit_ns ? 20000000ull : 100000000ull), spin_ns = 0;
        for (int i = 0; i < MAX_WINDOWS; i++) {
            window_t *w = &windows[i];
            if (!w->open) continue;
            if (now >= w->end_ns) { win_close(w); continue; }
            for (int b = 0; b < BATCH; b++) txmsg[b].msg_hdr.msg_name = &peers[w->peer];
            uint64_t due = pace(w, now);
            if (due && due < wake) {
                wake = due;
                /* awake for at most a quarter of a frame time: eight agents on two cores cannot all
                 * spin (at 12 000 frames/s each, windows sent half their frames) */
                spin_ns = spin_max != UINT64_MAX ? spin_max : w->gap_ns / 4 < SPIN_NS ? w->gap_ns / 4 : SPIN_NS;
            }
            if (w->end_ns < wake) wake = w->end_ns;
        }
        now = wall_ns();
        struct pollfd pf[2] = {{.fd = ctl, .events = POLLIN}, {.fd = sock, .events = POLLIN}};
        /* A sleep wakes tens of us late: the last SPIN_NS before a frame is due are spent
         * awake, so a frame leaves within a frame time of its due time. */
        if (wake > now + spin_ns) {
            uint64_t d = wake - now - spin_ns;
            struct timespec ts = {d / 1000000000ull, d % 1000000000ull};
            int r = ppoll(pf, 2, &ts, NULL);
            woke = 1;
            /* Woken by a frame while nothing of ours is due for a while: let a few more arrive,
             * so one recvmmsg takes them all (one wake-up per frame cost the receiver most of
             * its CPU at 100 000 frames/s). */
            if (r == 1 && pf[1].revents && !pf[0].revents) {
                uint64_t t = wall_ns(), left = wake > t + spin_ns ? wake - t - spin_ns : 0;
                if (left > RX_COALESCE_NS) left = RX_COALESCE_NS;
                if (left) {
                    struct timespec c = {0, (long)left};
                    nanosleep(&c, NULL);
                }
            }
        }
    }
}
