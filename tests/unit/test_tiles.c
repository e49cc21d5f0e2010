/*
 * test_tiles.c: kernels/kg_tiles.h, the tile rows behind a persistent
 * kernel's tile-row waits (KILN_MONO_ROWS=1), on the host: kg_tile_row
 * gives each rTask the tile row the templates give it (kg_gemm_raster's
 * order, kg_conv_tile's), and kg_win_rows's producer tile rows hold every
 * row a consumer tile reads, found by brute force over a convolution's
 * taps. A window that missed a row would let a consumer read it early.
 */
#include "unit.h"

#include "target/cuda/kernels/kg_tiles.h"

#include <stdlib.h>

/* kg_gemm_raster (kernels/kg_gemm.cuh), the order the GEMM templates
 * take their tiles in, written out for the test. */
static void raster(int t, int tiles_m, int tiles_n, int group, int *tm, int *tn)
{
    int per_group = group * tiles_n, first = t / per_group * group;
    int rows = tiles_m - first < group ? tiles_m - first : group;
    int r = t % per_group;
    *tm = first + r % rows;
    *tn = r / rows;
}

UNIT_TEST(tiles_gemm_raster_rows)
{
    /* rTask t: split t % splits of tile t / splits (a cluster pair: tile
     * (t / splits) / 2's columns 2 tn, 2 tn + 1), as emit_gemm.c numbers them */
    const int shapes[][4] = {{49, 2, 1, 0}, {13, 3, 3, 0}, {4, 32, 1, 0}, {1, 64, 8, 0}, {25, 4, 1, 1}, {9, 6, 2, 1}};
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        const int tm_n = shapes[s][0], tn_n = shapes[s][1], splits = shapes[s][2], pair = shapes[s][3] ? 2 : 1;
        kg_tiles x = {.div = (unsigned)(splits * pair), .tiles_m = (unsigned)tm_n, .tiles_n = (unsigned)(tn_n / pair),
                      .group = 8, .bm = 64, .m = (unsigned)tm_n * 64};
        int *count = calloc((size_t)tm_n, sizeof(int));
        for (int t = 0; t < tm_n * tn_n * splits; t++) {
            int slot = t / splits, tm, tn;
            if (pair > 1) raster(slot / 2, tm_n, tn_n / 2, 8, &tm, &tn);
            else raster(slot, tm_n, tn_n, 8, &tm, &tn);
            UNIT_CHECK_EQ_INT(kg_tile_row(&x, (unsigned)t), tm);
            if (count && tm >= 0 && tm < tm_n) count[tm]++;
        }
        /* each tile row's rTasks: what its counter waits for (per_row) */
        for (int i = 0; count && i < tm_n; i++) UNIT_CHECK_EQ_INT(count[i], tn_n * splits);
        free(count);
    }
}

UNIT_TEST(tiles_conv_rows)
{
    /* kg_conv_tile: split t % sk of tile t / sk, down the tile rows, then
     * the tile columns, then the groups */
    const int tm_n = 7, tn_n = 3, groups = 2, sk = 2;
    kg_tiles x = {.div = sk, .tiles_m = tm_n, .tiles_n = tn_n, .group = tm_n, .bm = 32, .m = tm_n * 32};
    for (int t = 0; t < tm_n * tn_n * groups * sk; t++) UNIT_CHECK_EQ_INT(kg_tile_row(&x, (unsigned)t), t / sk % tm_n);
}

/* Checks kg_win_rows against the rows a convolution's output tiles read:
 * imgs images of h x w in, kernel kh (dilation dh), stride sh, top pad ph,
 * bottom pad pe; consumer tiles of bm output pixels, producer tiles of pbm
 * input pixels. */
static void check_window(int imgs, int h, int w, int kh, int dh, int sh, int ph, int pe, int bm, int pbm)
{
    const int oh = (h + ph + pe - (kh - 1) * dh - 1) / sh + 1, ow = w, m = imgs * oh * ow, pm = imgs * h * w;
    if (oh <= 0) return;
    const int tiles = (m + bm - 1) / bm, ptiles = (pm + pbm - 1) / pbm;
    kg_tiles mine = {.div = 1, .tiles_m = (unsigned)tiles, .tiles_n = 1, .group = (unsigned)tiles, .bm = (unsigned)bm,
                     .m = (unsigned)m};
    kg_tiles prod = {.div = 1, .tiles_m = (unsigned)ptiles, .tiles_n = 1, .group = (unsigned)ptiles, .bm = (unsigned)pbm,
                     .m = (unsigned)pm};
    kg_win win = {.h = (unsigned)h, .w = (unsigned)w, .oh = (unsigned)oh, .ow = (unsigned)ow, .sh = (unsigned)sh,
                  .ph = (unsigned)ph, .kext = (unsigned)((kh - 1) * dh)};
    for (int t = 0; t < tiles; t++) {
        unsigned first, last;
        kg_win_rows(&win, &mine, &prod, (unsigned)t, &first, &last);
        UNIT_CHECK(first <= last && last < (unsigned)ptiles);
        int lo = pm, hi = -1; /* the producer tile rows really read */
        for (int p = t * bm; p < m && p < (t + 1) * bm; p++) {
            int n = p / (oh * ow), y = p % (oh * ow) / ow;
            for (int i = 0; i < kh; i++) {
                int iy = y * sh - ph + i * dh;
                if (iy < 0 || iy >= h) continue;
                for (int x = 0; x < w; x++) { /* every column: the window takes whole image rows */
                    int row = (n * h + iy) * w + x;
                    if (row / pbm < lo) lo = row / pbm;
                    if (row / pbm > hi) hi = row / pbm;
                }
            }
        }
        if (hi < 0) continue; /* a tile of pad only reads nothing */
        if ((unsigned)lo < first || (unsigned)hi > last)
            unit_fail(__FILE__, __LINE__,
                      "imgs %d h %d w %d kh %d dh %d sh %d ph %d bm %d pbm %d: tile %d reads producer tile rows "
                      "%d..%d, the window gives %u..%u",
                      imgs, h, w, kh, dh, sh, ph, bm, pbm, t, lo, hi, first, last);
        /* and no more than the whole image rows around them */
        UNIT_CHECK(last - first <= (unsigned)(hi - lo) + 1);
    }
}

UNIT_TEST(tiles_window_covers_reads)
{
    /* ResNet-50's: 3x3 at 56 and 28, 1x1 stride 2, 7x7 stride 2 */
    check_window(1, 56, 56, 3, 1, 1, 1, 1, 64, 64);
    check_window(1, 56, 56, 3, 1, 2, 1, 1, 64, 128);
    check_window(1, 56, 56, 1, 1, 2, 0, 0, 64, 64);
    check_window(1, 28, 28, 3, 1, 1, 1, 1, 128, 64);
    check_window(2, 14, 14, 3, 2, 1, 2, 2, 64, 32);
    check_window(3, 9, 5, 7, 1, 2, 3, 3, 16, 8);
    /* random geometries, tiles crossing images */
    srand(7);
    for (int i = 0; i < 300; i++) {
        int h = 1 + rand() % 20, w = 1 + rand() % 9, kh = 1 + rand() % 5, dh = 1 + rand() % 2, sh = 1 + rand() % 3;
        int ph = rand() % 3, pe = rand() % 3, imgs = 1 + rand() % 3;
        check_window(imgs, h, w, kh, dh, sh, ph, pe, 8 << rand() % 4, 8 << rand() % 4);
    }
}

UNIT_TEST(tiles_window_same_rows)
{
    /* h 0: the rows the consumer's tile writes (a residual, a product's A) */
    kg_tiles mine = {.div = 1, .tiles_m = 25, .tiles_n = 4, .group = 8, .bm = 128, .m = 3136};
    kg_tiles prod = {.div = 1, .tiles_m = 49, .tiles_n = 2, .group = 8, .bm = 64, .m = 3136};
    kg_win win = {0};
    for (unsigned t = 0; t < 100; t++) {
        unsigned first, last;
        kg_win_rows(&win, &mine, &prod, t, &first, &last);
        const unsigned tm = kg_tile_row(&mine, t);
        UNIT_CHECK_EQ_INT(first, tm * 2);
        UNIT_CHECK_EQ_INT(last, tm == 24 ? 48 : tm * 2 + 1); /* the last tile's 64 rows */
    }
}
