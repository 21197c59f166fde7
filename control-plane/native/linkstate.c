/* linkstate: the per-frame loop of the energy accounting's reactive policies, compiled.
 *
 * energy/states.py's ``_run`` and ``reactive`` walk every frame of a link in order: when it
 * could start always on, when under a sleep policy (TOS, TRS), the time asleep and the wakes,
 * then the delay the policy added per channel.  A Data Mining run holds ~10^8 port frames; the
 * accounting took 6 min 18 s with the Python loop, 26 s with this one.  The arithmetic is the
 * Python's, operation by operation (its float floor division included), so both give the same
 * numbers; energy/fast.py loads this library and falls back to the Python when it is absent.
 *
 * Built as a shared library by ``make native`` (build/liblinkstate.so); called through ctypes.
 */
#include <math.h>
#include <stdlib.h>

/* CPython's float floor division (Objects/floatobject.c: float_floor_div via _float_div_mod). */
static double py_floordiv(double vx, double wx)
{
    double mod = fmod(vx, wx);
    double div = (vx - mod) / wx;
    double floordiv;
    if (mod) {
        if ((wx < 0) != (mod < 0))
            div -= 1.0;
    }
    if (div) {
        floordiv = floor(div);
        if (div - floordiv > 0.5)
            floordiv += 1.0;
    } else {
        floordiv = copysign(0.0, vx / wx);
    }
    return floordiv;
}

struct dark {
    int on;
    double offset, period, length;
};

/* states.Dark.release: t, or the end of the dark window t falls in. */
static double release(const struct dark *dk, double t)
{
    if (!dk->on || dk->length <= 0)
        return t;
    double k = py_floordiv(t - dk->offset, dk->period);
    double start = dk->offset + k * dk->period;
    return (start <= t && t < start + dk->length) ? start + dk->length : t;
}

static double dmax(double a, double b) { return b > a ? b : a; }

/* states._run: each frame's start; the link's time asleep and its wakes (state off: always on). */
static int run(long n, const double *a, const double *d, const int *ch, int channels, double horizon,
               int state, double runway, double enter_cost, double wake_cost, const struct dark *dk,
               double *starts, double *asleep_out, long *wakes_out)
{
    double *free_at = calloc((size_t)channels, sizeof(double));
    if (!free_at)
        return -1;
    double link_free = 0.0, awake_at = 0.0, asleep = 0.0;
    long wakes = 0;
    for (long i = 0; i < n; i++) {
        double ready = a[i];
        if (state && a[i] - link_free > runway) {
            double asleep_at = link_free + runway + enter_cost;
            asleep += dmax(0.0, a[i] - asleep_at);
            ready = dmax(a[i], asleep_at) + wake_cost;
            awake_at = ready;
            wakes++;
        }
        double start = dmax(dmax(ready, awake_at), free_at[ch[i]]);
        start = release(dk, start);
        starts[i] = start;
        free_at[ch[i]] = start + d[i];
        link_free = dmax(link_free, free_at[ch[i]]);
    }
    if (state && horizon - link_free > runway)
        asleep += dmax(0.0, horizon - (link_free + runway + enter_cost));
    free(free_at);
    *asleep_out = asleep;
    *wakes_out = wakes;
    return 0;
}

/* states.reactive: per channel c, out[4c..4c+3] = frames, frames delayed, added delay summed, its
 * maximum; *asleep and *wakes for the link.  Frames sorted as the caller wants them read; ch in
 * [0, channels).  Returns 0, or -1 (no memory, a channel out of range). */
int linkstate_reactive(long n, const double *a, const double *d, const int *ch, int channels,
                       double horizon, int state, double runway, double enter_cost, double wake_cost,
                       int dark_on, double dark_offset, double dark_period, double dark_length,
                       double *out, double *asleep, long *wakes)
{
    struct dark dk = {dark_on, dark_offset, dark_period, dark_length};
    for (long i = 0; i < n; i++)
        if (ch[i] < 0 || ch[i] >= channels)
            return -1;
    for (int c = 0; c < 4 * channels; c++)
        out[c] = 0.0;
    *asleep = 0.0;
    *wakes = 0;
    if (n == 0) {
        if (state && horizon > runway)
            *asleep = dmax(0.0, horizon - (runway + enter_cost));
        return 0;
    }
    double *base = malloc((size_t)n * sizeof(double));
    if (!base)
        return -1;
    double dummy_asleep;
    long dummy_wakes;
    if (run(n, a, d, ch, channels, horizon, 0, 0, 0, 0, &dk, base, &dummy_asleep, &dummy_wakes)) {
        free(base);
        return -1;
    }
    double *starts = base;
    if (state) {
        starts = malloc((size_t)n * sizeof(double));
        if (!starts || run(n, a, d, ch, channels, horizon, 1, runway, enter_cost, wake_cost, &dk,
                           starts, asleep, wakes)) {
            free(base);
            free(starts);
            return -1;
        }
    }
    for (long i = 0; i < n; i++) {
        double *o = out + 4 * ch[i];
        o[0] += 1.0;
        double extra = starts[i] - base[i];
        if (extra > 1e-9) {
            o[1] += 1.0;
            o[2] += extra;
            o[3] = dmax(o[3], extra);
        }
    }
    if (starts != base)
        free(starts);
    free(base);
    return 0;
}
