/*
 * kc_norm.c: row-wise softmax / log-softmax, layer normalisation and row
 * mean for the `c` target; rTask t covers rows [t*rb, min(rows, (t+1)*rb)).
 *
 * Reductions keep several independent partial sums (16 floats, or 8
 * doubles) so that gcc vectorizes them without -ffast-math. Layer norm and
 * the row mean accumulate in double, two passes for the variance (mean,
 * then sum of squared deviations), which keeps them to ~1e-7 relative
 * whatever the rows' offset.
 */
#include <math.h>

#include "kc.h"
#include "kc_math.h"

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

int64_t kc_rows_rtasks(const kc_rows *p)
{
    int64_t rb = p->rb > 0 ? p->rb : 1;
    return p->rows > 0 ? (p->rows + rb - 1) / rb : 0;
}

enum { LANES = 16, DLANES = 8 };

static float row_max(const float *x, int64_t n)
{
    float m[LANES];
    for (int l = 0; l < LANES; l++) m[l] = -INFINITY;
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int l = 0; l < LANES; l++) m[l] = kc_sel(x[i + l] > m[l], x[i + l], m[l]);
    for (; i < n; i++) m[0] = kc_sel(x[i] > m[0], x[i], m[0]);
    float r = m[0];
    for (int l = 1; l < LANES; l++) r = m[l] > r ? m[l] : r;
    return r;
}

static double row_sum_d(const float *x, int64_t n)
{
    double s[DLANES] = {0};
    int64_t i = 0;
    for (; i + DLANES <= n; i += DLANES)
        for (int l = 0; l < DLANES; l++) s[l] += (double)x[i + l];
    for (; i < n; i++) s[0] += (double)x[i];
    double r = 0;
    for (int l = 0; l < DLANES; l++) r += s[l];
    return r;
}

static double row_sqdev_d(const float *x, int64_t n, double mean)
{
    double s[DLANES] = {0};
    int64_t i = 0;
    for (; i + DLANES <= n; i += DLANES)
        for (int l = 0; l < DLANES; l++) {
            double d = (double)x[i + l] - mean;
            s[l] += d * d;
        }
    for (; i < n; i++) {
        double d = (double)x[i] - mean;
        s[0] += d * d;
    }
    double r = 0;
    for (int l = 0; l < DLANES; l++) r += s[l];
    return r;
}

/* y = exp(x - m), returns the sum (16 float partial sums: the terms are
 * positive, so the error stays ~ n/16 ulp). */
static float exp_shift_sum(const float *x, float *y, int64_t n, float m, int store)
{
    float s[LANES] = {0};
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int l = 0; l < LANES; l++) {
            float e = kc_expf(x[i + l] - m);
            if (store) y[i + l] = e;
            s[l] += e;
        }
    for (; i < n; i++) {
        float e = kc_expf(x[i] - m);
        if (store) y[i] = e;
        s[0] += e;
    }
    float r = 0;
    for (int l = 0; l < LANES; l++) r += s[l];
    return r;
}

void kc_softmax_rtask(const kc_rows *p, int64_t t)
{
    int64_t rb = p->rb > 0 ? p->rb : 1, n = p->cols;
    for (int64_t row = t * rb; row < min64(p->rows, (t + 1) * rb); row++) {
        const float *x = p->x + row * n;
        float *y = p->y + row * n;
        float m = row_max(x, n);
        if (p->log) {
            float lse = m + kc_logf(exp_shift_sum(x, y, n, m, 0));
            for (int64_t i = 0; i < n; i++) y[i] = x[i] - lse;
        } else {
            float inv = 1.0f / exp_shift_sum(x, y, n, m, 1);
            for (int64_t i = 0; i < n; i++) y[i] *= inv;
        }
    }
}

void kc_layernorm_rtask(const kc_rows *p, int64_t t)
{
    int64_t rb = p->rb > 0 ? p->rb : 1, n = p->cols;
    for (int64_t row = t * rb; row < min64(p->rows, (t + 1) * rb); row++) {
        const float *x = p->x + row * n;
        float *y = p->y + row * n;
        double mean = n > 0 ? row_sum_d(x, n) / (double)n : 0.0;
        double var = n > 0 ? row_sqdev_d(x, n, mean) / (double)n : 0.0;
        float rstd = (float)(1.0 / sqrt(var + (double)p->eps));
        float mf = (float)mean;
        if (p->beta)
            for (int64_t i = 0; i < n; i++) y[i] = kc_fmaf((x[i] - mf) * rstd, p->gamma[i], p->beta[i]);
        else
            for (int64_t i = 0; i < n; i++) y[i] = (x[i] - mf) * rstd * p->gamma[i];
    }
}

void kc_row_mean_rtask(const kc_rows *p, int64_t t)
{
    int64_t rb = p->rb > 0 ? p->rb : 1, n = p->cols;
    for (int64_t row = t * rb; row < min64(p->rows, (t + 1) * rb); row++)
        p->y[row] = n > 0 ? (float)(row_sum_d(p->x + row * n, n) / (double)n) : 0.0f;
}
