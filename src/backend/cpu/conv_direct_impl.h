/* backend/cpu/conv_direct_impl.h - the inner loops of the direct convolution
 * kernels, written once and compiled per instruction set: conv_direct.c
 * includes this file after defining
 *   VL          floats per vector (16, 8 or 4)
 *   SFX         suffix of the generated functions (_avx512, _avx2, _base)
 *   VT, VZERO(), VSET1(f), VLOAD(p), VSTORE(p, v), VADD(a, b), VFMA(a, b, c)
 *   VCOPY_TAIL(dst, src, n)      copy n < VL floats
 *   CB_MAX      most output channels in registers (x2 vectors) in the forward
 *   CB_BWD      most input channels in registers (x2 vectors) in the backward data
 *   WB_CO, WB_T largest register block of the weight-gradient kernel
 *   DTARGET     the target attribute of every function (empty for the baseline),
 *               which GCC and clang both honour per function
 * No include guard: included 3 times; it undefines these parameters at its end.
 *
 * Layout ("wide" trick): an image padded to Hp x Wp is read as one flat
 * array; output position q = oy * Wp + ox reads input q + off(c, r, s) with
 * off = c*Hp*Wp + r*dh*Wp + s*dw, so a run of VL consecutive q is one
 * unaligned vector load per tap. Positions with ox >= OW are computed and
 * thrown away (forward) or carry zero gradient (backward). See conv_direct.c.
 */

#define DCAT_(a, b) a##b
#define DCAT(a, b) DCAT_(a, b)
#define DFN(name) DCAT(name, SFX)

/* Copy rows of len floats between strided layouts (padding an image,
 * widening a gradient, narrowing an output): rows are short and many, so an
 * inline vector loop beats a libc call per row. */
static DTARGET void DFN(copy_rows)(float *dst, int64_t dst_stride, const float *src,
                                   int64_t src_stride, int64_t rows, int64_t len)
{
    for (int64_t r = 0; r < rows; r++, dst += dst_stride, src += src_stride) {
        int64_t i = 0;
        for (; i + VL <= len; i += VL)
            VSTORE(dst + i, VLOAD(src + i));
        if (i < len)
            VCOPY_TAIL(dst + i, src + i, (int)(len - i));
    }
}

/* Forward, one block of cb output channels starting at co0, one image, two
 * vectors of positions at a time (each weight broadcast feeds two FMAs, which
 * halves the broadcast loads) and a last single vector if Qc is odd.
 * wt is the weight transposed to [C*R*S][K]; yw the wide output [K][Qp]. */
static inline __attribute__((always_inline)) DTARGET void
DFN(fwd_block)(const dplan *d, const float *xp, const float *wt, const float *bias, int64_t co0,
               float *yw, const int cb)
{
    const int64_t K = d->g.K, C = d->g.C, R = d->g.R, S = d->g.S;
    const int64_t rstep = d->g.dh * d->Wp, sstep = d->g.dw;
    int64_t qc = 0;
    for (; qc + 1 < d->Qc; qc += 2) {
        VT a0[CB_MAX], a1[CB_MAX];
#pragma GCC unroll 32
        for (int c = 0; c < cb; c++)
            a0[c] = a1[c] = bias ? VSET1(bias[co0 + c]) : VZERO();
        const float *wp = wt + co0;
        const float *xq = xp + qc * VL;
        for (int64_t ci = 0; ci < C; ci++)
            for (int64_t r = 0; r < R; r++) {
                const float *row = xq + ci * d->HpWp + r * rstep;
                for (int64_t s = 0; s < S; s++) {
                    VT v0 = VLOAD(row + s * sstep), v1 = VLOAD(row + s * sstep + VL);
#pragma GCC unroll 32
                    for (int c = 0; c < cb; c++) {
                        VT w = VSET1(wp[c]);
                        a0[c] = VFMA(v0, w, a0[c]);
                        a1[c] = VFMA(v1, w, a1[c]);
                    }
                    wp += K;
                }
            }
#pragma GCC unroll 32
        for (int c = 0; c < cb; c++) {
            VSTORE(yw + (co0 + c) * d->Qp + qc * VL, a0[c]);
            VSTORE(yw + (co0 + c) * d->Qp + qc * VL + VL, a1[c]);
        }
    }
    if (qc < d->Qc) {
        VT acc[CB_MAX];
#pragma GCC unroll 32
        for (int c = 0; c < cb; c++)
            acc[c] = bias ? VSET1(bias[co0 + c]) : VZERO();
        const float *wp = wt + co0;
        const float *xq = xp + qc * VL;
        for (int64_t ci = 0; ci < C; ci++)
            for (int64_t r = 0; r < R; r++) {
                const float *row = xq + ci * d->HpWp + r * rstep;
                for (int64_t s = 0; s < S; s++) {
                    VT v = VLOAD(row + s * sstep);
#pragma GCC unroll 32
                    for (int c = 0; c < cb; c++)
                        acc[c] = VFMA(v, VSET1(wp[c]), acc[c]);
                    wp += K;
                }
            }
#pragma GCC unroll 32
        for (int c = 0; c < cb; c++)
            VSTORE(yw + (co0 + c) * d->Qp + qc * VL, acc[c]);
    }
}

#define DFWD_CASE(n)                                                                               \
    case n:                                                                                        \
        DFN(fwd_block)(d, xp, wt, bias, co0, yw, (n) > CB_MAX ? CB_MAX : (n));                     \
        break;

static DTARGET void DFN(fwd_image)(const dplan *d, const float *xp, const float *wt,
                                   const float *bias, float *yw)
{
    int64_t K = d->g.K, n_blocks = (K + CB_MAX - 1) / CB_MAX;
    for (int64_t b = 0, co0 = 0; b < n_blocks; b++) {
        int cb = (int)(K / n_blocks + (b < K % n_blocks));
        /* one case per macro, laid out by hand */
        /* clang-format off */
        switch (cb) {
            DFWD_CASE(1) DFWD_CASE(2) DFWD_CASE(3) DFWD_CASE(4) DFWD_CASE(5) DFWD_CASE(6)
#if CB_MAX > 6
            DFWD_CASE(7) DFWD_CASE(8) DFWD_CASE(9) DFWD_CASE(10) DFWD_CASE(11) DFWD_CASE(12)
#endif
        default: TG_UNREACHABLE("forward register block of channels", cb);
        }
        /* clang-format on */
        co0 += cb;
    }
}

/* Backward data, one block of cb input channels starting at ci0, one image:
 * dxp[ci][q + off(r, s)] += sum_co w[co][ci][r][s] * dyw[co][q]. wt2 is the
 * weight transposed to [R*S][K][C]; dyw the wide gradient [K][Qp] with zeros
 * at the thrown-away positions; dxp the padded wide input gradient. Two
 * vectors of positions share each weight broadcast, as in the forward. */
static inline __attribute__((always_inline)) DTARGET void
DFN(bwd_data_block)(const dplan *d, const float *dyw, const float *wt2, int64_t ci0, float *dxp,
                    const int cb)
{
    const int64_t K = d->g.K, C = d->g.C, R = d->g.R, S = d->g.S;
    const int64_t rstep = d->g.dh * d->Wp, sstep = d->g.dw;
    int64_t qc = 0;
    for (; qc + 1 < d->Qc; qc += 2) {
        const float *dq = dyw + qc * VL;
        for (int64_t r = 0; r < R; r++)
            for (int64_t s = 0; s < S; s++) {
                VT a0[CB_BWD], a1[CB_BWD];
#pragma GCC unroll 32
                for (int c = 0; c < cb; c++)
                    a0[c] = a1[c] = VZERO();
                const float *wp = wt2 + (r * S + s) * K * C + ci0;
                for (int64_t co = 0; co < K; co++) {
                    VT v0 = VLOAD(dq + co * d->Qp), v1 = VLOAD(dq + co * d->Qp + VL);
#pragma GCC unroll 32
                    for (int c = 0; c < cb; c++) {
                        VT w = VSET1(wp[c]);
                        a0[c] = VFMA(v0, w, a0[c]);
                        a1[c] = VFMA(v1, w, a1[c]);
                    }
                    wp += C;
                }
                float *base = dxp + qc * VL + r * rstep + s * sstep + ci0 * d->HpWp;
#pragma GCC unroll 32
                for (int c = 0; c < cb; c++) {
                    float *p = base + c * d->HpWp;
                    VSTORE(p, VADD(VLOAD(p), a0[c]));
                    VSTORE(p + VL, VADD(VLOAD(p + VL), a1[c]));
                }
            }
    }
    if (qc < d->Qc) {
        const float *dq = dyw + qc * VL;
        for (int64_t r = 0; r < R; r++)
            for (int64_t s = 0; s < S; s++) {
                VT acc[CB_BWD];
#pragma GCC unroll 32
                for (int c = 0; c < cb; c++)
                    acc[c] = VZERO();
                const float *wp = wt2 + (r * S + s) * K * C + ci0;
                for (int64_t co = 0; co < K; co++) {
                    VT v = VLOAD(dq + co * d->Qp);
#pragma GCC unroll 32
                    for (int c = 0; c < cb; c++)
                        acc[c] = VFMA(v, VSET1(wp[c]), acc[c]);
                    wp += C;
                }
                float *base = dxp + qc * VL + r * rstep + s * sstep + ci0 * d->HpWp;
#pragma GCC unroll 32
                for (int c = 0; c < cb; c++) {
                    float *p = base + c * d->HpWp;
                    VSTORE(p, VADD(VLOAD(p), acc[c]));
                }
            }
    }
}

#define DBWD_CASE(n)                                                                               \
    case n:                                                                                        \
        DFN(bwd_data_block)(d, dyw, wt2, ci0, dxp, (n) > CB_BWD ? CB_BWD : (n));                   \
        break;

static DTARGET void DFN(bwd_data_image)(const dplan *d, const float *dyw, const float *wt2,
                                        float *dxp)
{
    int64_t C = d->g.C, n_blocks = (C + CB_BWD - 1) / CB_BWD;
    for (int64_t b = 0, ci0 = 0; b < n_blocks; b++) {
        int cb = (int)(C / n_blocks + (b < C % n_blocks));
        /* one case per macro, laid out by hand */
        /* clang-format off */
        switch (cb) {
            DBWD_CASE(1) DBWD_CASE(2) DBWD_CASE(3) DBWD_CASE(4) DBWD_CASE(5) DBWD_CASE(6)
            DBWD_CASE(7) DBWD_CASE(8) DBWD_CASE(9) DBWD_CASE(10) DBWD_CASE(11) DBWD_CASE(12)
#if CB_BWD > 12
            DBWD_CASE(13) DBWD_CASE(14) DBWD_CASE(15) DBWD_CASE(16) DBWD_CASE(17)
            DBWD_CASE(18) DBWD_CASE(19) DBWD_CASE(20) DBWD_CASE(21) DBWD_CASE(22)
            DBWD_CASE(23) DBWD_CASE(24)
#endif
        default: TG_UNREACHABLE("backward register block of channels", cb);
        }
        /* clang-format on */
        ci0 += cb;
    }
}

/* Backward weight, one register block of cb output channels x tb taps (a tap
 * is one (c, r, s)), over cnt prepared images: accv[co][t] (VL partial sums
 * per weight element) += sum_q dyw[co][q] * xp[q + off(t)]. */
static inline __attribute__((always_inline)) DTARGET void
DFN(bwd_weight_block)(const dplan *d, const float *xps, const float *dyws, int64_t cnt, int64_t co0,
                      int64_t t0, float *accv, const int cb, const int tb)
{
    const int64_t CRS = d->CRS, RS = d->g.R * d->g.S, R = d->g.R, S = d->g.S;
    int64_t offs[WB_T];
    /* (c, r, s) of tap t0, then stepped without divisions */
    int64_t c_ = t0 / RS, r_ = (t0 % RS) / S, s_ = t0 % S;
    for (int t = 0; t < tb; t++) {
        offs[t] = c_ * d->HpWp + r_ * d->g.dh * d->Wp + s_ * d->g.dw;
        if (++s_ == S) {
            s_ = 0;
            if (++r_ == R) {
                r_ = 0;
                c_++;
            }
        }
    }
    VT acc[WB_CO][WB_T];
#pragma GCC unroll 8
    for (int c = 0; c < cb; c++)
#pragma GCC unroll 8
        for (int t = 0; t < tb; t++)
            acc[c][t] = VLOAD(accv + ((co0 + c) * CRS + t0 + t) * VL);
    for (int64_t img = 0; img < cnt; img++) {
        const float *xq = xps + img * d->xp_f, *dq = dyws + img * d->yw_f + co0 * d->Qp;
        for (int64_t qc = 0; qc < d->Qc; qc++, xq += VL, dq += VL) {
            VT dv[WB_CO];
#pragma GCC unroll 8
            for (int c = 0; c < cb; c++)
                dv[c] = VLOAD(dq + c * d->Qp);
#pragma GCC unroll 8
            for (int t = 0; t < tb; t++) {
                VT xv = VLOAD(xq + offs[t]);
#pragma GCC unroll 8
                for (int c = 0; c < cb; c++)
                    acc[c][t] = VFMA(dv[c], xv, acc[c][t]);
            }
        }
    }
#pragma GCC unroll 8
    for (int c = 0; c < cb; c++)
#pragma GCC unroll 8
        for (int t = 0; t < tb; t++)
            VSTORE(accv + ((co0 + c) * CRS + t0 + t) * VL, acc[c][t]);
}

#define DW_CASE(c, t)                                                                              \
    case (c)*8 + (t):                                                                              \
        DFN(bwd_weight_block)                                                                      \
        (d, xps, dyws, cnt, co0, t0, accv, (c) > WB_CO ? WB_CO : (c), (t) > WB_T ? WB_T : (t));    \
        break;
#define DW_ROW(c)                                                                                  \
    DW_CASE(c, 1) DW_CASE(c, 2) DW_CASE(c, 3) DW_CASE(c, 4) DW_CASE(c, 5) DW_CASE(c, 6)

static DTARGET void DFN(bwd_weight_images)(const dplan *d, const float *xps, const float *dyws,
                                           int64_t cnt, float *accv)
{
    int64_t K = d->g.K, CRS = d->CRS;
    int64_t nbc = (K + WB_CO - 1) / WB_CO, nbt = (CRS + WB_T - 1) / WB_T;
    for (int64_t bc = 0, co0 = 0; bc < nbc; bc++) {
        int cb = (int)(K / nbc + (bc < K % nbc));
        for (int64_t bt = 0, t0 = 0; bt < nbt; bt++) {
            int tb = (int)(CRS / nbt + (bt < CRS % nbt));
            /* one case per macro, laid out by hand */
            /* clang-format off */
            switch (cb * 8 + tb) {
                DW_ROW(1) DW_ROW(2) DW_ROW(3) DW_ROW(4) DW_ROW(5)
            default:
                TG_UNREACHABLE("weight-gradient register block (channels * 8 + taps)", cb * 8 + tb);
            }
            /* clang-format on */
            t0 += tb;
        }
        co0 += cb;
    }
}

#undef DFWD_CASE
#undef DBWD_CASE
#undef DW_CASE
#undef DW_ROW
#undef DFN
#undef DCAT
#undef DCAT_

/* Undefine the parameters so the next instantiation can define its own. */
#undef VL
#undef SFX
#undef VT
#undef VZERO
#undef VSET1
#undef VLOAD
#undef VSTORE
#undef VADD
#undef VFMA
#undef VCOPY_TAIL
#undef CB_MAX
#undef CB_BWD
#undef WB_CO
#undef WB_T
#undef DTARGET
