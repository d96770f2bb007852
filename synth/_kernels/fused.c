/* Fused, read-once first-order kernel of GLMBackend (cflab; IFCA journal Alg. 2 / conference Alg. 1).
 *
 * For every client of a block, its n_i rows are streamed from memory once.  For each row x_r (in L1 after
 * the first touch) the kernel computes the scores s_rj = <x_r, theta_j> of all M models, the per-sample loss
 * l(s_rj, y_r) and its derivative u_rj = dl/ds, and accumulates u_rj x_r into M per-model gradient
 * accumulators (M d values, cache resident).  At the end of a client its loss sums and its M unscaled
 * gradient sums  sum_r u_rj x_r  are known; the caller then decides the weights (IFCA's argmin, or any
 * `choose`) and `combine` adds only the weighted accumulators into G.  Each byte of client data is read
 * from memory once per call, at the price of M axpys per row (4Md flops per row instead of (2M+2)d):
 * the right trade while the data stream, not arithmetic, bounds the kernel (small M).
 *
 * Losses as functions of the score s (as in synth/backend.py):
 *   linear   l = (s - y)^2                       dl/ds = 2 (s - y)
 *   logistic l = log(1 + e^s) - y s              dl/ds = sigmoid(s) - y
 * Only rows r < n_i of client i are read: padded rows contribute nothing to losses or gradients.
 *
 * The file instantiates itself twice (double and float) by including itself with CFLAB_REAL defined;
 * it must be compiled from an absolute path.  Built at run time by synth/_kernels/__init__.py.
 */
#ifndef CFLAB_REAL

#include <math.h>
#include <stddef.h>
#include <string.h>

#define CFLAB_FUSED_ABI 2
long cflab_fused_abi(void) { return CFLAB_FUSED_ABI; }

/* per-sample loss and its derivative, in double whatever the data type */
static inline void pointwise(double s, double y, int logistic, double *loss, double *dl)
{
    if (!logistic) {
        double r = s - y;
        *loss = r * r;
        *dl = 2.0 * r;
    } else {
        double e = exp(-fabs(s));  /* stable log(1 + e^s) and sigmoid(s) */
        *loss = (s > 0 ? s : 0.0) + log1p(e) - y * s;
        *dl = (s >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e)) - y;
    }
}

#define CFLAB_REAL double
#define CFLAB_SUF f64
#define CFLAB_LANES 4
#include __FILE__
#undef CFLAB_REAL
#undef CFLAB_SUF
#undef CFLAB_LANES

#define CFLAB_REAL float
#define CFLAB_SUF f32
#define CFLAB_LANES 8
#include __FILE__
#undef CFLAB_REAL
#undef CFLAB_SUF
#undef CFLAB_LANES

#else /* ------------------------------------------------------------------ one instantiation per type */

#define CAT_(a, b) a##_##b
#define CAT(a, b) CAT_(a, b)
#define T CFLAB_REAL
#define L CFLAB_LANES
#define VT CAT(vec, CFLAB_SUF)
#define LOAD CAT(load, CFLAB_SUF)
#define STORE CAT(store, CFLAB_SUF)
#define HSUM CAT(hsum, CFLAB_SUF)
#define DOTS CAT(dots, CFLAB_SUF)
#define AXPY CAT(axpy, CFLAB_SUF)
#define CLIENT CAT(client, CFLAB_SUF)
#define LINE (64 / (long)sizeof(T))

typedef T VT __attribute__((vector_size(32)));  /* 32 bytes: one AVX register, two SSE/NEON ones */

/* memcpy keeps the unaligned vector loads free of aliasing assumptions; it compiles to one load/store */
static inline __attribute__((always_inline)) VT LOAD(const T *p) { VT v; memcpy(&v, p, sizeof v); return v; }
static inline __attribute__((always_inline)) void STORE(T *p, VT v) { memcpy(p, &v, sizeof v); }
static inline __attribute__((always_inline)) T HSUM(VT v)
{
    T s = 0;
    for (int l = 0; l < L; l++) s += v[l];
    return s;
}

/* Scores of R rows x[0..R-1] against G models t[0..G-1] (R, G constant, R * G <= 8):
 * s[r * lds + j] = <x_r, t_j>.  The R*G accumulators are independent chains (enough in flight to cover the
 * FMA latency); every load of a row serves G models and every load of a model R rows.  Unless pf is NULL,
 * rows pf[0..R-1] (the next block) are prefetched into L2, one line per row per 64 bytes of x: measured
 * 6-12 % faster than the hardware prefetcher alone (which loses ground while the core works from L2);
 * prefetching further ahead or into L1 was slower. */
static inline __attribute__((always_inline)) void DOTS(const T *const *x, const T *t, long d, int R, int G,
                                                       T *s, long lds, const T *const *pf)
{
    VT acc[4][4];
    for (int r = 0; r < R; r++)
        for (int j = 0; j < G; j++) acc[r][j] = (VT){0};
    long c = 0;
    for (; c + L <= d; c += L) {
        VT tv[4];
        if (pf && (c & (LINE - 1)) == 0)
            for (int r = 0; r < R; r++) __builtin_prefetch(pf[r] + c, 0, 1);
        for (int j = 0; j < G; j++) tv[j] = LOAD(t + (size_t)j * d + c);
        for (int r = 0; r < R; r++) {
            VT a = LOAD(x[r] + c);
            for (int j = 0; j < G; j++) acc[r][j] += a * tv[j];
        }
    }
    for (int r = 0; r < R; r++)
        for (int j = 0; j < G; j++) {
            T v = HSUM(acc[r][j]);
            for (long cc = c; cc < d; cc++) v += x[r][cc] * t[(size_t)j * d + cc];
            s[r * lds + j] = v;
        }
}

/* g_j += sum_r u[r * ldu + j] x_r for R rows and G models (both 1..4, constant): one sweep over the rows
 * (now in cache) updates the G accumulators, each loaded and stored once per R rows. */
static inline __attribute__((always_inline)) void AXPY(const T *const *x, const T *u, long ldu, T *g, long d,
                                                       int R, int G)
{
    VT w[4][4];
    for (int r = 0; r < R; r++)
        for (int j = 0; j < G; j++) w[r][j] = (VT){0} + u[r * ldu + j];
    long c = 0;
    for (; c + L <= d; c += L) {
        VT a[4];
        for (int r = 0; r < R; r++) a[r] = LOAD(x[r] + c);
        for (int j = 0; j < G; j++) {
            T *gj = g + (size_t)j * d + c;
            VT v = LOAD(gj);
            for (int r = 0; r < R; r++) v += w[r][j] * a[r];
            STORE(gj, v);
        }
    }
    for (; c < d; c++)
        for (int j = 0; j < G; j++)
            for (int r = 0; r < R; r++) g[(size_t)j * d + c] += u[r * ldu + j] * x[r][c];
}

/* the constant-(R, G) instances, R and G in 1..4 */
#define SWITCH_R(R, G, CALL)                                                        \
    switch (R) {                                                                    \
        case 1: CALL(1, G); break;                                                  \
        case 2: CALL(2, G); break;                                                  \
        case 3: CALL(3, G); break;                                                  \
        default: CALL(4, G);                                                        \
    }
#define SWITCH_RG(R, G, CALL)                                                       \
    switch (G) {                                                                    \
        case 1: SWITCH_R(R, 1, CALL); break;                                        \
        case 2: SWITCH_R(R, 2, CALL); break;                                        \
        case 3: SWITCH_R(R, 3, CALL); break;                                        \
        default: SWITCH_R(R, 4, CALL);                                              \
    }

/* Client i of the block: loss sums li[j] and, unless gi is NULL, gradient sums gi[j * d ..] (arguments as
 * for cflab_fused below).  Rows are taken four at a time: their scores (the rows streamed from memory),
 * their losses and derivatives, then one sweep over the four rows (from cache) per group of up to four
 * models.  pf_client is the client whose first rows to prefetch while the last block runs (or NULL). */
static void CLIENT(const T *Xi, const T *yi, long n, long sxr, long syr, const T *pf_client, long pf_rows,
                   long d, const T *models, long M, int logistic, double *li, T *gi, T *work, long only)
{
    T *s = work, *u = work + 4 * M;  /* scores and derivatives of a block of 4 rows: (4, M) each */
    for (long j = 0; j < M; j++) li[j] = 0.0;
    if (gi && only >= 0) memset(gi + (size_t)only * d, 0, sizeof(T) * (size_t)d);
    else if (gi) memset(gi, 0, sizeof(T) * (size_t)M * d);
    for (long r0 = 0; r0 < n; r0 += 4) {
        int R = n - r0 < 4 ? (int)(n - r0) : 4;
        const T *x[4], *pf[4];
        for (int r = 0; r < R; r++) x[r] = Xi + (r0 + r) * sxr;
        /* the next block's rows: in this client, else the next client's first rows */
        const T *nx = r0 + 4 < n ? Xi + (r0 + 4) * sxr : pf_client;
        long nr = r0 + 4 < n ? n - r0 - 4 : pf_rows;
        for (int r = 0; r < 4; r++) pf[r] = nx && r < nr ? nx + r * sxr : (nx && nr > 0 ? nx : x[0]);
        for (long j0 = 0; j0 < M; j0 += 4) {
            int G = M - j0 < 4 ? (int)(M - j0) : 4;
            const T *t = models + (size_t)j0 * d;
            if (G <= 2) {  /* up to 4 rows x 2 models of accumulators */
#define CALL(RR, GG) DOTS(x, t, d, RR, GG, s + j0, M, j0 == 0 ? pf : NULL)
                SWITCH_RG(R, G, CALL);
            } else {       /* 3 or 4 models: rows in pairs, <= 8 accumulators */
                for (int h = 0; h < R; h += 2) {
                    int RH = R - h < 2 ? R - h : 2;
                    const T *const *xh = x + h;
                    T *sh = s + h * M + j0;
#undef CALL
#define CALL(RR, GG) DOTS(xh, t, d, RR, GG, sh, M, j0 == 0 ? pf + h : NULL)
                    SWITCH_RG(RH, G, CALL);
                }
            }
#undef CALL
        }
        for (int r = 0; r < R; r++) {
            double yv = (double)yi[(r0 + r) * syr];
            for (long j = 0; j < M; j++) {
                double lv, dv;
                pointwise((double)s[r * M + j], yv, logistic, &lv, &dv);
                li[j] += lv;
                u[r * M + j] = (T)dv;
            }
        }
        if (!gi) continue;
        if (only >= 0) {  /* the one model this client is expected to be weighted on: 1 axpy per row, not M */
#define CALL(RR, GG) AXPY(x, u + only, M, gi + (size_t)only * d, d, RR, GG)
            SWITCH_R(R, 1, CALL);
#undef CALL
            continue;
        }
        for (long j0 = 0; j0 < M; j0 += 4) {
            int G = M - j0 < 4 ? (int)(M - j0) : 4;
#define CALL(RR, GG) AXPY(x, u + j0, M, gi + (size_t)j0 * d, d, RR, GG)
            SWITCH_RG(R, G, CALL);
#undef CALL
        }
    }
}

/* Losses and unscaled gradient sums of a block of b clients on M models.
 *   X: client i's row r starts at X + clients[i] * sxc + r * sxr (rows contiguous, d values);
 *   y: client i's response r is y[clients[i] * syc + r * syr];   rows[i] = n_i real rows of client i;
 *   models: (M, d) contiguous;  loss (b, M) out: sum_r l(s_rj, y_r) (double);
 *   grad (b, M, d) out: sum_r u_rj x_r, or NULL for losses only;  work: 8 * M values of scratch;
 *   next: NULL (this call does clients 0..b-1), or a counter shared by several threads calling at once
 *   with the same arguments (each its own work): each takes the next client until none is left, so a
 *   thread that is descheduled holds up nobody.  A client's numbers do not depend on the thread.
 *   only: NULL, or per client the one model j whose gradient sum to form (-1: all M); the others' slots of
 *   grad are then left unwritten.  Each model's sum is the same chain of operations whether it is formed
 *   alone or with the others, so the numbers do not depend on `only` either. */
void CAT(cflab_fused, CFLAB_SUF)(const T *X, long sxc, long sxr, const T *y, long syc, long syr,
                                 const long *clients, const long *rows, long b, long d, const T *models,
                                 long M, int logistic, double *loss, T *grad, T *work, long *next,
                                 const long *only)
{
    for (long k = 0;; k++) {
        long i = next ? __atomic_fetch_add(next, 1, __ATOMIC_RELAXED) : k;
        if (i >= b) break;
        long nxt = i + 1 < b ? i + 1 : -1;  /* prefetch target: the next client in the block */
        CLIENT(X + clients[i] * sxc, y + clients[i] * syc, rows[i], sxr, syr,
               nxt >= 0 ? X + clients[nxt] * sxc : NULL, nxt >= 0 ? rows[nxt] : 0, d, models, M, logistic,
               loss + i * M, grad ? grad + (size_t)i * M * d : NULL, work, only ? only[i] : -1);
    }
}

/* sum of a[0..n-1] with 8 independent vector accumulators: a memory read ceiling for bench/roofline.py
 * (the data stream of the fused kernel without its arithmetic), built by the same compiler and flags. */
double CAT(cflab_stream_sum, CFLAB_SUF)(const T *a, long n)
{
    VT acc[8];
    for (int k = 0; k < 8; k++) acc[k] = (VT){0};
    long c = 0;
    for (; c + 8 * L <= n; c += 8 * L)
        for (int k = 0; k < 8; k++) acc[k] += LOAD(a + c + k * L);
    double s = 0;
    for (int k = 0; k < 8; k++) s += (double)HSUM(acc[k]);
    for (; c < n; c++) s += (double)a[c];
    return s;
}

/* G[j] += coef[i, j] * grad[i, j] over the b clients in order, skipping zero weights (a client adds only
 * to the models it is weighted on); G is float64 whatever the data type.  Client order is fixed, so the
 * sum does not depend on how the clients were split into blocks or threads. */
void CAT(cflab_combine, CFLAB_SUF)(const T *grad, const double *coef, long b, long M, long d, double *G)
{
    for (long i = 0; i < b; i++)
        for (long j = 0; j < M; j++) {
            double c = coef[i * M + j];
            if (c == 0.0) continue;
            const T *src = grad + ((size_t)i * M + j) * d;
            double *dst = G + (size_t)j * d;
            for (long k = 0; k < d; k++) dst[k] += c * (double)src[k];
        }
}

#undef CAT_
#undef CAT
#undef T
#undef L
#undef VT
#undef LOAD
#undef STORE
#undef HSUM
#undef DOTS
#undef AXPY
#undef CLIENT
#undef LINE
#undef SWITCH_R
#undef SWITCH_RG

#endif
