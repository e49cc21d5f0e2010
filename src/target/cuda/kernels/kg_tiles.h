/*
 * kg_tiles.h: which rows of a tensor an rTask of a product or convolution
 * writes and reads, for the tile-row waits of a persistent kernel
 * (KILN_MONO_ROWS=1; emit.c plan_waits, kg.h kg_wait_rows). Plain C: the
 * generated code has it just before kg.h, whose waits take its types, and
 * the compiler's unit tests include it to check it against the templates'
 * tile orders and a brute-force window.
 *
 * A "row" is a row of a value's storage: a pixel of an NHWC activation
 * (its channels), a row of a row-major matrix. An rTask of a producer
 * writes the rows of one tile row tm (kg_tile_row), [tm bm, min(m, tm bm +
 * bm)), and counts itself in that tile row's counter once done; a consumer
 * whose rTask reads only the rows of a window of its own tile's (the same
 * rows, or a convolution's input rows) waits for the counters of the
 * producer's tile rows that the window meets, instead of for the whole
 * producer.
 */
#ifndef KILN_KG_TILES_H
#define KILN_KG_TILES_H

#if defined(__CUDACC__)
#define KG_TILES_FN static __device__ __forceinline__
#else
#define KG_TILES_FN static inline
#endif

/* How a member's rTask t maps to its tile row, and where its counters are. */
typedef struct kg_tiles {
    unsigned div;     /* rTasks of one tile: splits of K (times 2 for a cluster pair's columns) */
    unsigned tiles_m; /* tile rows */
    unsigned tiles_n; /* tile columns (of one group of a grouped convolution) */
    unsigned group;   /* tile rows a raster group holds (kg_gemm_raster; tiles_m: column after column) */
    unsigned bm;      /* rows a tile row holds */
    unsigned m;       /* rows */
    unsigned rows;    /* its first counter among the kernel's tile-row counters (kg_rows_<kernel>) */
    unsigned per_row; /* rTasks a tile row has, each adding 1 to its counter (0: it counts none) */
} kg_tiles;

/* A consumer's wait on some tile rows of a producer: which rows its rTask
 * reads, from the rows its own tile writes. */
typedef struct kg_win {
    unsigned tiles;   /* the producer's kg_tiles */
    unsigned h, w;    /* a convolution's input: height, width (h 0: the rows its tile writes) */
    unsigned oh, ow;  /* its output's */
    unsigned sh, ph;  /* vertical stride and top padding */
    unsigned kext;    /* (kernel height - 1) x dilation */
} kg_win;

/* Tile row of rTask t: t / div is the tile, numbered as kg_gemm_raster
 * numbers them (group rows of tiles at a time, down the rows within a group)
 * and, past tiles_m x tiles_n, again for the next group of a grouped
 * convolution (kg_conv_tile: group tiles_m, down the rows). */
KG_TILES_FN unsigned kg_tile_row(const kg_tiles *x, unsigned t)
{
    const unsigned u = t / x->div % (x->tiles_m * x->tiles_n);
    const unsigned per = x->group * x->tiles_n, first = u / per * x->group;
    const unsigned rows = x->tiles_m - first < x->group ? x->tiles_m - first : x->group;
    return first + u % per % rows;
}

/* The producer's tile rows *first .. *last that consumer rTask t reads
 * through window w (mine: the consumer's tiles, prod: the producer's). In
 * 32 bits: the emitter makes windows only where every row number fits. */
KG_TILES_FN void kg_win_rows(const kg_win *w, const kg_tiles *mine, const kg_tiles *prod, unsigned t,
                             unsigned *first, unsigned *last)
{
    const unsigned r0 = kg_tile_row(mine, t) * mine->bm;
    const unsigned r1 = mine->m - r0 > mine->bm ? r0 + mine->bm : mine->m; /* past the last */
    unsigned lo = r0, hi = r1;
    if (w->h) {
        /* output pixels r0 .. r1 - 1 read input rows oh sh - ph .. oh sh - ph + kext of their
         * images, taken whole */
        const unsigned hw = w->oh * w->ow;
        const unsigned n0 = r0 / hw, oh0 = r0 % hw / w->ow, n1 = (r1 - 1) / hw, oh1 = (r1 - 1) % hw / w->ow;
        const unsigned a = oh0 * w->sh < w->ph ? 0 : oh0 * w->sh - w->ph;
        const unsigned b = oh1 * w->sh + w->kext < w->ph ? 0 : oh1 * w->sh + w->kext - w->ph;
        lo = (n0 * w->h + (a < w->h ? a : w->h - 1)) * w->w;
        hi = (n1 * w->h + (b < w->h ? b : w->h - 1) + 1) * w->w;
    }
    unsigned f = lo / prod->bm, l = (hi - 1) / prod->bm;
    if (l > prod->tiles_m - 1) l = prod->tiles_m - 1;
    if (f > l) f = l;
    *first = f;
    *last = l;
}

#endif /* KILN_KG_TILES_H */
