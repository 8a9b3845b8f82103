/* tests/ops/test_optim.c - SGD_UPDATE and ADAM_UPDATE: the kernels against
 * torch.optim (and, for bias_correction off, LAMB and gradient clipping,
 * against PyTorch numbers from tests/ops/gen_optim_golden.py), fast against
 * reference on 1 and 2 threads, the shape rule's errors.
 *
 * The kernels are called directly (the cpu backend's forward, the def's reference) on
 * update nodes built by tg_graph_add_optimizer from a parameter whose
 * gradient is a plain input node.
 * TG_TEST_LABELS: isa
 */
#include "backend/backend.h"
#include "tg_test.h"

#include "core/alloc.h"
#include "core/error.h"
#include "core/pool.h"
#include "core/rng.h"
#include "ops/op.h"
#include "core/convert.h"
#include "graph/optim_params.h"
#include "runtime/staging.h"
#include "tilegraph/optim.h"

#include <math.h>

#include <string.h>

/* ---- building one update ------------------------------------------------------------ */

typedef struct one_update {
    tg_graph *g;
    tg_tensor *u; /* the update node: in[0] param, in[1..] state, in[n_in-1] grad */
} one_update;

static one_update build(const tg_optimizer *o, int64_t n)
{
    one_update r = {tg_graph_create(), NULL};
    tg_tensor *w = tg_param(r.g, "w", tg_shape1(n), (tg_init){TG_INIT_ZEROS, 0, 0});
    tg_tensor *gw = tg_input(r.g, "w_grad", TG_F32, tg_shape1(n));
    if (w)
        w->grad = gw;
    TG_CHECK_OK(tg_graph_add_optimizer(r.g, o));
    r.u = tg_graph_find(r.g, "w/update");
    TG_CHECK(r.u != NULL);
    return r;
}

/* ---- three steps against torch.optim ------------------------------------------------ */

enum { N_GOLDEN = 11 };

/* Reference numbers made once with PyTorch 1.13 (/usr/bin/python3), torch.optim
 * in float64 on p0 below with the gradients G, hyper-parameters rounded to
 * float32 (float(np.float32(x))) as tilegraph stores them:
 *   p = torch.nn.Parameter(torch.tensor(P0)); opt = torch.optim.<X>([p], ...)
 *   for k in range(3): p.grad = torch.tensor(G[k]); opt.step(); [sched.step()]
 * and printing p and opt.state[p] after each step. */
static const double P0[3] = {0.5, -1.0, 2.0};
static const double G[3][3] = {{0.1, -0.2, 0.3}, {-0.4, 0.5, 0.05}, {0.25, 0.0, -0.6}};

typedef struct golden {
    const char *label;
    tg_optimizer opt;
    double p[3][3];    /* after steps 0, 1, 2 */
    double s[2][3][3]; /* state inputs 1, 2 (momentum_buffer; exp_avg, exp_avg_sq) */
    double ref_tol;    /* reference kernel vs torch */
} golden;

static tg_optimizer sgd_opt(float lr, float mom, float damp, float wd, bool nesterov)
{
    tg_optimizer o = tg_optimizer_sgd(lr, mom);
    o.dampening = damp;
    o.weight_decay = wd;
    o.nesterov = nesterov;
    return o;
}

static tg_optimizer adam_opt(tg_optimizer o, float b1, float b2, float eps, float wd)
{
    o.beta1 = b1;
    o.beta2 = b2;
    o.eps = eps;
    o.weight_decay = wd;
    return o;
}

static tg_optimizer no_bias_correction(tg_optimizer o)
{
    o.bias_correction = false;
    return o;
}

static tg_optimizer max_weight_norm(tg_optimizer o, float m)
{
    o.max_weight_norm = m;
    return o;
}

static golden goldens[N_GOLDEN];

static void make_goldens(void)
{
    /* SGD(lr=0.1) */
    goldens[0] = (golden){"sgd",
                          sgd_opt(0.1f, 0, 0, 0, false),
                          {{0.48999999985098841, -0.97999999970197682, 1.9699999995529651},
                           {0.53000000044703488, -1.0300000004470349, 1.9649999994784593},
                           {0.50500000007450585, -1.0300000004470349, 2.025000000372529}},
                          {{{0}}},
                          1e-12};
    /* SGD(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01). Step 0
     * stores buf = d (0.105 = 0.1 + 0.01*0.5), not (1 - dampening)*d. */
    goldens[1] = (golden){"sgd momentum",
                          sgd_opt(0.1f, 0.9f, 0.1f, 0.01f, false),
                          {{0.48949999985471365, -0.9789999997094273, 1.9679999995678663},
                           {0.51560945045527518, -1.0042189005529225, 1.9329287998987987},
                           {0.5161439065740755, -1.0260121137085352, 1.953625085843989}},
                          {{{0.1049999998882413, -0.20999999977648259, 0.31999999955296515},
                            {-0.26109450211500373, 0.25218900467704236, 0.35071199146465959},
                            {-0.0053445611083630306, 0.2179321283086858, -0.20696285636791478}}},
                          1e-12};
    /* SGD(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01) */
    goldens[2] = (golden){"sgd nesterov",
                          sgd_opt(0.05f, 0.9f, 0, 0.01f, true),
                          {{0.49002499998714777, -0.98004999997429554, 1.9695999999709428},
                           {0.52330697650234148, -1.0181139529376277, 1.9500188805088463},
                           {0.51123412435002336, -1.0293453242069537, 1.9906796756383121}},
                          {{{0.1049999998882413, -0.20999999977648259, 0.31999999955296515},
                            {-0.30059975271363554, 0.30119950542727114, 0.35769599152774367},
                            {-0.01530670062736017, 0.26089840840157813, -0.25857342778394238}}},
                          1e-12};
    /* Adam(lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1): L2 */
    goldens[3] =
        (golden){"adam",
                 adam_opt(tg_optimizer_adam(0.01f), 0.9f, 0.999f, 1e-8f, 0.1f),
                 {{0.49000000089018403, -0.99000000055685078, 1.9900000004235174},
                  {0.49421122934493239, -0.99194687254082559, 1.9806840746157013},
                  {0.49282783741706648, -0.99218108075098066, 1.9785740046288274}},
                 {{{0.015000003650784511, -0.030000007301569022, 0.050000012218952256},
                   {-0.021600005358496471, 0.013100003551338772, 0.069900016042354823},
                   {0.010502115198185858, 0.0018705316456709387, 0.022716844230079174}},
                  {{2.2499710544940935e-05, 8.999884217976374e-05, 0.00024999678432937602},
                   {0.00014567662438501954, 0.00025070777301943668, 0.00031174699402318538},
                   {0.00023518280468959603, 0.0002602965280660885, 0.00047298217387137931}}},
                 1e-12};
    /* AdamW(lr=0.01, betas=(0.8, 0.99), eps=1e-3, weight_decay=0.1): decoupled */
    goldens[4] = (golden){"adamw",
                          adam_opt(tg_optimizer_adamw(0.01f), 0.8f, 0.99f, 1e-3f, 0.1f),
                          {{0.48959901013067592, -0.98904975147598839, 1.9880332228306108},
                           {0.49517291305148825, -0.99299922042804756, 1.9785706449204101},
                           {0.49476565594043287, -0.99558267110548448, 1.9804539115707944}},
                          {{{0.019999998807907107, -0.039999997615814215, 0.059999996423721308},
                            {-0.063999995946884172, 0.067999995470047023, 0.057999997258186296},
                            {-0.0012000005006789841, 0.054399997186660734, -0.073599994349479739}},
                           {{9.9999904632568375e-05, 0.0003999996185302735, 0.00089999914169311521},
                            {0.00169899838066101, 0.0028959972419738732, 0.00091599913501738683},
                            {0.0023070078170108633, 0.0028670372971725164, 0.0045068357191753224}}},
                          1e-12};
    /* SGD(lr=0.1, momentum=0.5) with StepLR(step_size=2, gamma=0.5) */
    tg_optimizer steplr = sgd_opt(0.1f, 0.5f, 0, 0, false);
    steplr.lr.kind = TG_LR_STEP;
    steplr.lr.step_size = 2;
    steplr.lr.gamma = 0.5f;
    goldens[5] = (golden){"sgd steplr",
                          steplr,
                          {{0.48999999985098841, -0.97999999970197682, 1.9699999995529651},
                           {0.52500000037252903, -1.0200000002980232, 1.9499999992549419},
                           {0.5212500003166497, -1.0300000004470349, 1.974999999627471}},
                          {{{0.1, -0.2, 0.3}, {-0.35, 0.4, 0.2}, {0.075, 0.2, -0.5}}},
                          1e-12};
    /* Adam(lr=0.01, betas=(0.9, 0.999), eps=1e-8) with
     * CosineAnnealingLR(T_max=4, eta_min=0.001). tg_lr_at rounds the
     * learning rate to float, torch keeps it in double: a looser tolerance. */
    tg_optimizer cosine = adam_opt(tg_optimizer_adam(0.01f), 0.9f, 0.999f, 1e-8f, 0);
    cosine.lr.kind = TG_LR_COSINE;
    cosine.lr.total_steps = 4;
    cosine.lr.min_lr = 0.001f;
    goldens[6] =
        (golden){"adam cosine",
                 cosine,
                 {{0.49000000122351728, -0.99000000072351735, 1.9900000005568508},
                  {0.49485759949970592, -0.993839304959513, 1.9831991683298389},
                  {0.49506899290842998, -0.99571939013500255, 1.9848291011764385}},
                 {{{0.010000002384185792, -0.020000004768371583, 0.030000007152557372},
                   {-0.031000007629394588, 0.032000008106231798, 0.032000006914138623},
                   {-0.0029000001668928743, 0.028800006532668971, -0.031200008845329599}},
                  {{9.9998712539672858e-06, 3.9999485015869143e-05, 8.9998841285705557e-05},
                   {0.00016998781157493426, 0.00028995626739501288, 9.2408811416611053e-05},
                   {0.00023231702128918049, 0.00028966631486068977, 0.00045231176893774345}}},
                 1e-9};
    /* Bias correction off and LAMB: from tests/ops/gen_optim_golden.py
     * (PyTorch 1.13; torch.optim has neither, so that script writes them in
     * plain torch ops after PopTorch's definitions). */
    /* goldens[4] (torch.optim.AdamW) again from the plain-ops rule: it agrees. */
    /* AdamW(lr=0.01, betas=(0.8, 0.99), eps=1e-3, weight_decay=0.1, bias_correction=False) */
    goldens[7] =
        (golden){"adamw no bias correction",
                 no_bias_correction(adam_opt(tg_optimizer_adamw(0.01f), 0.8f, 0.99f, 1e-3f, 0.1f)),
                 {{0.48131817550892086, -0.97995237391387469, 1.9786451539897327},
                  {0.49599594064909203, -0.99137790374800239, 1.9581156980823147},
                  {0.49574468632691099, -1.0003599923076276, 1.9669599871942092}},
                 {{{0.019999998807907107, -0.039999997615814215, 0.059999996423721308},
                   {-0.063999995946884186, 0.067999995470047023, 0.057999997258186296},
                   {-0.001200000500678991, 0.054399997186660734, -0.073599994349479725}},
                  {{9.9999904632568375e-05, 0.0003999996185302735, 0.00089999914169311521},
                   {0.00169899838066101, 0.0028959972419738732, 0.00091599913501738683},
                   {0.0023070078170108633, 0.0028670372971725164, 0.0045068357191753224}}},
                 1e-12};
    /* Adam(lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1, bias_correction=False) */
    goldens[8] =
        (golden){"adam no bias correction",
                 no_bias_correction(adam_opt(tg_optimizer_adam(0.01f), 0.9f, 0.999f, 1e-8f, 0.1f)),
                 {{0.46837707966572001, -0.96837704633205612, 1.9683770329985708},
                  {0.48635861162692046, -0.97675805626803613, 1.9288423347033574},
                  {0.47970341752758106, -0.97812843322112986, 1.9187580205678454}},
                 {{{0.015000003650784511, -0.030000007301569022, 0.050000012218952256},
                   {-0.02181623462551624, 0.013316233148361931, 0.069683786313330109},
                   {0.010228982665951021, 0.0022170264790406322, 0.022003819948663461}},
                  {{2.2499710544940935e-05, 8.999884217976374e-05, 0.00024999678432937602},
                   {0.00014719920937848524, 0.00025244658710228945, 0.00031067485954719583},
                   {0.00023623424186887187, 0.00026173458422354558, 0.00047610529982571227}}},
                 1e-12};
    /* LAMB(lr=0.01, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.1) */
    goldens[9] =
        (golden){"lamb",
                 adam_opt(tg_optimizer_lamb(0.01f), 0.9f, 0.999f, 1e-6f, 0.1f),
                 {{0.48758042401841017, -0.98698895085696936, 1.9858061031014795},
                  {0.49758716210092352, -0.9937192695449798, 1.9665681522212206},
                  {0.49661236927721053, -1.0145913487506981, 1.9751502377812475}},
                 {{{0.010000002384185792, -0.020000004768371583, 0.030000007152557372},
                   {-0.031000007629394588, 0.032000008106231798, 0.032000006914138623},
                   {-0.0029000001668928743, 0.028800006532668971, -0.031200008845329599}},
                  {{9.9998712539672858e-06, 3.9999485015869143e-05, 8.9998841285705557e-05},
                   {0.00016998781157493426, 0.00028995626739501288, 9.2408811416611053e-05},
                   {0.00023231702128918049, 0.00028966631486068977, 0.00045231176893774345}}},
                 1e-12};
    /* LAMB(lr=0.02, betas=(0.8, 0.99), eps=1e-4, weight_decay=0, bias_correction=False,
     * max_weight_norm=1.5) */
    goldens[10] = (golden){
        "lamb no bias correction max_weight_norm",
        max_weight_norm(
            no_bias_correction(adam_opt(tg_optimizer_lamb(0.02f), 0.8f, 0.99f, 1e-4f, 0)), 1.5f),
        {{0.48274638772838829, -0.98266054882279552, 1.9826317457347868},
         {0.49955974011619103, -0.99635128316970922, 1.9618983202027462},
         {0.50006090521619329, -1.0167357356559852, 1.983903385304767}},
        {{{0.019999998807907107, -0.039999997615814215, 0.059999996423721308},
          {-0.063999995946884186, 0.067999995470047023, 0.057999997258186296},
          {-0.001200000500678991, 0.054399997186660734, -0.073599994349479725}},
         {{9.9999904632568375e-05, 0.0003999996185302735, 0.00089999914169311521},
          {0.00169899838066101, 0.0028959972419738732, 0.00091599913501738683},
          {0.0023070078170108633, 0.0028670372971725164, 0.0045068357191753224}}},
        1e-12};
}

static bool near(double a, double b, double rtol, double atol)
{
    return fabs(a - b) <= atol + rtol * fabs(b);
}

/* Run three steps of the golden's optimizer through the reference kernel
 * (use_ref) or the fast kernel and compare p and state after each step. */
static void check_golden(const golden *gd, bool use_ref)
{
    one_update b = build(&gd->opt, 3);
    if (!b.u) {
        tg_graph_destroy(b.g);
        return;
    }
    int n_in = b.u->n_in, n_state = n_in - 2;
    double dbuf[4][3] = {{0}};
    float fbuf[4][3] = {{0}};
    for (int i = 0; i < 3; i++) {
        dbuf[0][i] = P0[i];
        fbuf[0][i] = (float)P0[i];
    }
    double rtol = use_ref ? gd->ref_tol : 2e-6, atol = use_ref ? gd->ref_tol : 1e-7;
    for (int step = 0; step < 3; step++) {
        for (int i = 0; i < 3; i++) {
            dbuf[n_in - 1][i] = G[step][i];
            fbuf[n_in - 1][i] = (float)G[step][i];
        }
        if (use_ref) {
            tg_ref_args a = {.node = b.u, .step = step};
            for (int k = 0; k < n_in; k++)
                a.in[k] = dbuf[k];
            tg_op_get(b.u->op)->reference(&a);
        } else {
            tg_kernel_args a = {.node = b.u, .step = step};
            for (int k = 0; k < n_in; k++)
                a.in[k] = fbuf[k];
            tg_backend_cpu.kernel(b.u->op)->forward(&a);
        }
        for (int k = 0; k <= n_state; k++)
            for (int i = 0; i < 3; i++) {
                double got = use_ref ? dbuf[k][i] : fbuf[k][i];
                double want = k == 0 ? gd->p[step][i] : gd->s[k - 1][step][i];
                if (!near(got, want, rtol, atol))
                    tg_test_fail(__FILE__, __LINE__,
                                 "%s (%s kernel) step %d input %d [%d]: %.17g, torch %.17g",
                                 gd->label, use_ref ? "reference" : "fast", step, k, i, got, want);
            }
    }
    tg_graph_destroy(b.g);
}

static void test_reference_matches_torch(void)
{
    for (int k = 0; k < N_GOLDEN; k++)
        check_golden(&goldens[k], true);
}

static void test_fast_matches_torch(void)
{
    for (int k = 0; k < N_GOLDEN; k++)
        check_golden(&goldens[k], false);
}

/* The SGD rules in isolation, by hand: first momentum step, nesterov. */
static void test_sgd_by_hand(void)
{
    /* momentum 0.5, dampening 0.5, lr 1, p 1, g 2, two steps:
     * step 0: buf = 2 (no dampening on the first step), p = 1 - 2 = -1
     * step 1: buf = 0.5*2 + 0.5*2 = 2, p = -1 - 2 = -3 */
    tg_optimizer o = sgd_opt(1.0f, 0.5f, 0.5f, 0, false);
    one_update b = build(&o, 1);
    float p = 1, buf = 123, g = 2; /* buf's old value must be ignored on step 0 */
    tg_kernel_args a = {.node = b.u, .in = {&p, &buf, &g}, .step = 0};
    tg_backend_cpu.kernel(TG_OP_SGD_UPDATE)->forward(&a);
    TG_CHECK(buf == 2.0f && p == -1.0f);
    a.step = 1;
    tg_backend_cpu.kernel(TG_OP_SGD_UPDATE)->forward(&a);
    TG_CHECK(buf == 2.0f && p == -3.0f);
    tg_graph_destroy(b.g);

    /* nesterov, momentum 0.5, lr 1, p 0, g 1: step 0: buf = 1, d = 1 + 0.5 = 1.5;
     * step 1 with g 1: buf = 0.5 + 1 = 1.5, d = 1 + 0.75 = 1.75. */
    o = sgd_opt(1.0f, 0.5f, 0, 0, true);
    b = build(&o, 1);
    double dp = 0, dbuf = 0, dg = 1;
    tg_ref_args r = {.node = b.u, .in = {&dp, &dbuf, &dg}, .step = 0};
    tg_op_get(TG_OP_SGD_UPDATE)->reference(&r);
    TG_CHECK(dbuf == 1.0 && dp == -1.5);
    r.step = 1;
    tg_op_get(TG_OP_SGD_UPDATE)->reference(&r);
    TG_CHECK(dbuf == 1.5 && dp == -3.25);
    tg_graph_destroy(b.g);
}

/* The first Adam step moves every element by lr * sign(g) (up to eps),
 * whatever |g|: the bias corrections undo (1 - b1) and (1 - b2). */
static void test_adam_first_step_is_lr(void)
{
    tg_optimizer o = tg_optimizer_adam(0.01f);
    one_update b = build(&o, 3);
    double p[3] = {1, 1, 1}, m[3] = {0}, v[3] = {0}, g[3] = {0.1, -5, 300};
    tg_ref_args r = {.node = b.u, .in = {p, m, v, g}, .step = 0};
    tg_op_get(TG_OP_ADAM_UPDATE)->reference(&r);
    for (int i = 0; i < 3; i++)
        TG_CHECK_NEAR(p[i], 1 - 0.01 * (g[i] > 0 ? 1 : -1), 1e-7);
    tg_graph_destroy(b.g);
}

/* LAMB's rules by hand: a zero weight has trust ratio 1 (the step is lr*r,
 * exactly Adam's first step with r = sign(g)); a weight of norm 3 takes a
 * step of norm lr*3 whatever the gradient; max_weight_norm caps that norm. */
static void test_lamb_trust_ratio(void)
{
    tg_optimizer o = adam_opt(tg_optimizer_lamb(0.1f), 0.9f, 0.999f, 0, 0);
    one_update b = build(&o, 2);
    double p[2] = {0, 0}, m[2] = {0}, v[2] = {0}, g[2] = {0.5, -2};
    tg_ref_args r = {.node = b.u, .in = {p, m, v, g}, .step = 0};
    tg_op_get(TG_OP_ADAM_UPDATE)->reference(&r);
    TG_CHECK_NEAR(p[0], -0.1, 1e-7);
    TG_CHECK_NEAR(p[1], 0.1, 1e-7);
    tg_graph_destroy(b.g);

    for (int capped = 0; capped < 2; capped++) {
        o = max_weight_norm(adam_opt(tg_optimizer_lamb(0.1f), 0.9f, 0.999f, 0, 0),
                            capped ? 1.5f : 0.0f);
        b = build(&o, 2);
        /* r = sign(g) = (1, 1), ||r|| = sqrt 2; ||p|| = 3 (or 1.5 capped) */
        float fp[2] = {3, 0}, fm[2] = {0}, fv[2] = {0}, fg[2] = {1, 7};
        tg_kernel_args a = {.node = b.u, .in = {fp, fm, fv, fg}, .step = 0};
        tg_backend_cpu.kernel(TG_OP_ADAM_UPDATE)->forward(&a);
        double norm = capped ? 1.5 : 3.0, moved = 0.1 * norm / sqrt(2.0);
        TG_CHECK_NEAR(fp[0], 3 - moved, 1e-6);
        TG_CHECK_NEAR(fp[1], -moved, 1e-6);
        tg_graph_destroy(b.g);
    }
}

/* Bias correction off: the first Adam step is lr * m / (sqrt(v) + eps) with
 * m = 0.1 g and v = 0.001 g^2, i.e. lr * 0.1/sqrt(0.001) * sign(g). */
static void test_no_bias_correction_first_step(void)
{
    tg_optimizer o = no_bias_correction(adam_opt(tg_optimizer_adam(0.01f), 0.9f, 0.999f, 0, 0));
    one_update b = build(&o, 2);
    float p[2] = {1, 1}, m[2] = {0}, v[2] = {0}, g[2] = {0.5f, -40};
    tg_kernel_args a = {.node = b.u, .in = {p, m, v, g}, .step = 0};
    tg_backend_cpu.kernel(TG_OP_ADAM_UPDATE)->forward(&a);
    double moved = 0.01 * (1.0 - 0.9f) / sqrt(1.0 - 0.999f);
    TG_CHECK_NEAR(p[0], 1 - moved, 1e-6);
    TG_CHECK_NEAR(p[1], 1 + moved, 1e-6);
    tg_graph_destroy(b.g);
}

/* ---- gradient clipping against torch.nn.utils.clip_grad_norm_ ------------------- */

typedef struct clip_golden {
    float max_norm;
    double total, a[3], b[2];
} clip_golden;

/* From tests/ops/gen_optim_golden.py: a.grad = (0.3, -1.2, 0.4), b.grad = (2, -0.5). */
static const clip_golden clip_goldens[2] = {
    /* clip_grad_norm_([a, b], max_norm=0.5) */
    {0.5f,
     2.4372115213907879,
     {0.061545720237151477, -0.24618288094860591, 0.08206096031620197},
     {0.41030480158100985, -0.10257620039525246}},
    /* clip_grad_norm_([a, b], max_norm=10) */
    {10.0f, 2.4372115213907879, {0.29999999999999999, -1.2, 0.40000000000000002}, {2, -0.5}},
};

/* The engine's clipping is these three steps (runtime/engine.c): sums of
 * squares per gradient, the factor from the global norm, the scaling; here
 * on two gradients, in f32 and bf16 storage. */
static void test_clip_matches_torch(void)
{
    for (int k = 0; k < 2; k++) {
        const clip_golden *c = &clip_goldens[k];
        float a[3] = {0.3f, -1.2f, 0.4f}, b[2] = {2.0f, -0.5f};
        double total =
            sqrt(tg_sum_squares_typed(a, TG_F32, 3) + tg_sum_squares_typed(b, TG_F32, 2));
        TG_CHECK_NEAR(total, c->total, 1e-6);
        float factor = tg_grad_clip_factor(total, c->max_norm);
        tg_scale_typed(a, TG_F32, 3, factor);
        tg_scale_typed(b, TG_F32, 2, factor);
        for (int i = 0; i < 3; i++)
            TG_CHECK_NEAR(a[i], c->a[i], 1e-6);
        for (int i = 0; i < 2; i++)
            TG_CHECK_NEAR(b[i], c->b[i], 1e-6);
        /* the same in bf16 storage, to bf16's precision */
        uint16_t h[2];
        tg_convert(b, TG_F32, h, TG_BF16, 2);
        float back[2];
        tg_scale_typed(h, TG_BF16, 2, 2.0f);
        tg_convert(h, TG_BF16, back, TG_F32, 2);
        TG_CHECK_NEAR(back[0], 2 * c->b[0], 1e-2 * fabs(c->b[0]) + 1e-6);
    }
    /* off: 0 and inf leave the gradients alone, whatever their norm */
    TG_CHECK(tg_grad_clip_factor(1e30, 0.0f) == 1.0f);
    TG_CHECK(tg_grad_clip_factor(1e30, INFINITY) == 1.0f);
    TG_CHECK(tg_grad_clip_factor(0.5, 1.0f) == 1.0f);
}

/* ---- fast kernel against reference, 1 and 2 threads ------------------------------- */

static void fast_vs_reference(const char *label, const tg_optimizer *o, int64_t n, tg_pool *pool1,
                              tg_pool *pool2)
{
    one_update b = build(o, n);
    if (!b.u) {
        tg_graph_destroy(b.g);
        return;
    }
    int n_in = b.u->n_in;
    float *f1[4], *f2[4];
    double *d[4];
    const tg_kernel_def *def = tg_backend_cpu.kernel(b.u->op);
    size_t scratch_bytes = def->scratch ? def->scratch(b.u, 2) : 0;
    void *scratch = scratch_bytes ? tg_malloc(scratch_bytes) : NULL;
    tg_rng rng;
    tg_rng_seed(&rng, 42);
    for (int k = 0; k < n_in; k++) {
        f1[k] = tg_malloc((size_t)n * sizeof(float));
        f2[k] = tg_malloc((size_t)n * sizeof(float));
        d[k] = tg_malloc((size_t)n * sizeof(double));
        for (int64_t i = 0; i < n; i++) {
            /* states start at zero as in a session; p and g in U(-1, 1) */
            float x = k == 0 || k == n_in - 1 ? (float)(2 * tg_rng_uniform(&rng) - 1) : 0.0f;
            f1[k][i] = f2[k][i] = x;
            d[k][i] = x;
        }
    }
    for (int step = 0; step < 3; step++) {
        /* a new gradient each step */
        if (step > 0)
            for (int64_t i = 0; i < n; i++) {
                float x = (float)(2 * tg_rng_uniform(&rng) - 1);
                f1[n_in - 1][i] = f2[n_in - 1][i] = x;
                d[n_in - 1][i] = x;
            }
        tg_kernel_args a1 = {.node = b.u, .pool = pool1, .step = step};
        /* the scratch the compiler would plan for 2 threads (LAMB's norms) */
        tg_kernel_args a2 = {.node = b.u,
                             .pool = pool2,
                             .step = step,
                             .scratch = scratch,
                             .scratch_bytes = scratch_bytes};
        tg_ref_args r = {.node = b.u, .step = step};
        for (int k = 0; k < n_in; k++) {
            a1.in[k] = f1[k];
            a2.in[k] = f2[k];
            r.in[k] = d[k];
        }
        tg_backend_cpu.kernel(b.u->op)->forward(&a1);
        tg_backend_cpu.kernel(b.u->op)->forward(&a2);
        tg_op_get(b.u->op)->reference(&r);
    }
    /* Elementwise work: splitting over threads must not change a bit. */
    for (int k = 0; k < n_in - 1; k++)
        if (memcmp(f1[k], f2[k], (size_t)n * sizeof(float)) != 0)
            tg_test_fail(__FILE__, __LINE__, "%s: input %d differs between 1 and 2 threads", label,
                         k);
    int bad = 0;
    for (int k = 0; k < n_in - 1; k++)
        for (int64_t i = 0; i < n && bad < 5; i++)
            if (!near(f1[k][i], d[k][i], 1e-5, 1e-6)) {
                tg_test_fail(__FILE__, __LINE__, "%s: input %d [%lld]: fast %.9g, reference %.9g",
                             label, k, (long long)i, f1[k][i], d[k][i]);
                bad++;
            }
    for (int k = 0; k < n_in; k++) {
        tg_free(f1[k]);
        tg_free(f2[k]);
        tg_free(d[k]);
    }
    tg_free(scratch);
    tg_graph_destroy(b.g);
}

static void test_fast_vs_reference_threads(void)
{
    tg_pool *pool1 = tg_pool_create(1), *pool2 = tg_pool_create(2);
    TG_CHECK(pool1 && pool2);
    /* large enough to split over 2 threads; odd, so chunk and vector tails run */
    const int64_t n = 70001;
    for (int k = 0; k < N_GOLDEN; k++)
        fast_vs_reference(goldens[k].label, &goldens[k].opt, n, pool1, pool2);
    tg_pool_destroy(pool1);
    tg_pool_destroy(pool2);
}

/* ---- operands in bf16: read in place, the bits of staging ------------------------------ */

/* Which operands are stored in bf16: every one, or the parameter and the
 * gradient with f32 state (the default moment types), or the state alone
 * with an f32 gradient (unscaled all the same when asked). */
static bool stored_bf16(int pattern, int k, int n_in)
{
    bool state = k > 0 && k < n_in - 1;
    return pattern == 0 || (pattern == 1 ? !state : state);
}

/* The staged path (runtime/staging.c): the bf16 operands widened into f32
 * copies, the gradient times the unscale, the f32 kernel, the updated
 * copies rounded back to nearest or stochastically from the index. */
static void run_staged(const tg_tensor *u, void *const *store, const bool *bf16, int64_t n,
                       int64_t step, const tg_update_opts *o, tg_pool *pool)
{
    tg_kernel_args a = {.node = u, .pool = pool, .step = step};
    float *f[4] = {0};
    for (int k = 0; k < u->n_in; k++) {
        a.in[k] = store[k];
        bool grad = k == u->n_in - 1;
        if (!bf16[k] && !(grad && o->grad_unscale != 1.0f))
            continue;
        f[k] = tg_malloc((size_t)n * sizeof(float));
        tg_convert(store[k], bf16[k] ? TG_BF16 : TG_F32, f[k], TG_F32, (size_t)n);
        for (int64_t i = 0; grad && o->grad_unscale != 1.0f && i < n; i++)
            f[k][i] *= o->grad_unscale;
        a.in[k] = f[k];
    }
    tg_backend_cpu.kernel(u->op)->forward(&a);
    for (int k = 0; k < u->n_in; k++) {
        if (k < u->n_mutated && bf16[k] && o->stochastic)
            tg_convert_stochastic(f[k], store[k], TG_BF16, (size_t)n, o->round_key ^ (uint64_t)k,
                                  (uint64_t)o->first);
        else if (k < u->n_mutated && bf16[k])
            tg_convert(f[k], TG_F32, store[k], TG_BF16, (size_t)n);
        tg_free(f[k]);
    }
}

/* Three steps of one update on storage of the pattern's types, the kernel
 * reading bf16 itself (in_type, update) against the staged path: the same
 * bytes in every updated operand. */
static void native_vs_staged(const char *label, const tg_optimizer *opt, int64_t n, int pattern,
                             const tg_update_opts *o, tg_pool *pool)
{
    one_update b = build(opt, n);
    if (!b.u || !tg_op_update_reads_bf16(b.u)) {
        tg_graph_destroy(b.g);
        return;
    }
    int n_in = b.u->n_in;
    void *nat[4], *stg[4];
    bool bf16[4];
    tg_rng rng;
    tg_rng_seed(&rng, 7);
    for (int k = 0; k < n_in; k++) {
        bf16[k] = stored_bf16(pattern, k, n_in);
        size_t bytes = (size_t)n * (bf16[k] ? 2 : 4);
        nat[k] = tg_malloc(bytes);
        stg[k] = tg_malloc(bytes);
        float *x = tg_malloc((size_t)n * sizeof(float));
        for (int64_t i = 0; i < n; i++) /* moments start non-zero: v stays positive */
            x[i] = (float)((k == 2 && n_in == 4 ? 0.5 : 2) * tg_rng_uniform(&rng) -
                           (k == 2 && n_in == 4 ? 0 : 1));
        tg_convert(x, TG_F32, nat[k], bf16[k] ? TG_BF16 : TG_F32, (size_t)n);
        memcpy(stg[k], nat[k], bytes);
        tg_free(x);
    }
    for (int64_t step = 0; step < 3; step++) {
        tg_update_opts u = *o;
        u.round_key = o->round_key + (uint64_t)step;
        tg_kernel_args a = {.node = b.u, .pool = pool, .step = step, .update = &u};
        for (int k = 0; k < n_in; k++) {
            a.in[k] = nat[k];
            a.in_type[k] = bf16[k] ? TG_BF16 : TG_F32;
        }
        tg_backend_cpu.kernel(b.u->op)->forward(&a);
        run_staged(b.u, stg, bf16, n, step, &u, pool);
    }
    for (int k = 0; k < n_in - 1; k++)
        if (memcmp(nat[k], stg[k], (size_t)n * (bf16[k] ? 2 : 4)) != 0)
            tg_test_fail(__FILE__, __LINE__,
                         "%s, n %lld, types %d, stochastic %d, unscale %g, %d threads: input %d "
                         "differs from the staged path's",
                         label, (long long)n, pattern, o->stochastic, (double)o->grad_unscale,
                         tg_pool_threads(pool), k);
    for (int k = 0; k < n_in; k++) {
        tg_free(nat[k]);
        tg_free(stg[k]);
    }
    tg_graph_destroy(b.g);
}

/* SGD (plain, momentum with dampening and decay, nesterov), Adam and AdamW
 * over lengths around the kernel's chunk and vector widths and one split
 * over 2 threads; to nearest and stochastic (from a shard's first index),
 * with and without a loss scale to undo. */
static void test_bf16_native_matches_staged(void)
{
    tg_pool *pools[2] = {tg_pool_create(1), tg_pool_create(2)};
    TG_CHECK(pools[0] && pools[1]);
    const int64_t lengths[] = {1, 15, 513, 70001};
    const tg_update_opts opts[] = {
        {1.0f, false, 0, 0},
        {1.0f / 1024, false, 0, 0},
        {1.0f, true, 0x5eedull, 0},
        {1.0f / 512, true, 0xfeedull, 1000003},
    };
    for (int c = 0; c < N_GOLDEN; c++)
        for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++)
            for (int pattern = 0; pattern < 3; pattern++)
                for (size_t o = 0; o < sizeof opts / sizeof opts[0]; o++)
                    for (int t = 0; t < 2; t++)
                        native_vs_staged(goldens[c].label, &goldens[c].opt, lengths[l], pattern,
                                         &opts[o], pools[t]);
    tg_pool_destroy(pools[0]);
    tg_pool_destroy(pools[1]);
}

/* ---- shape rule ------------------------------------------------------------------------- */

static void test_infer_errors(void)
{
    tg_optimizer o = tg_optimizer_sgd(0.1f, 0.9f);
    tg_node_params p = tg_optim_params_put(&o);
    tg_graph *g = tg_graph_create();
    tg_tensor *w = tg_param(g, "fc/weight", tg_shape2(3, 4), (tg_init){TG_INIT_ZEROS, 0, 0});
    tg_tensor *buf = tg_state(g, "buf", tg_shape2(3, 4), (tg_init){TG_INIT_ZEROS, 0, 0});
    tg_tensor *bad = tg_input(g, "grad", TG_F32, tg_shape1(12));
    TG_CHECK(tg_node_create(g, TG_OP_SGD_UPDATE, 3, (tg_tensor *[]){w, buf, bad}, &p) == NULL);
    TG_CHECK(tg_graph_status(g) == TG_ERR_SHAPE);
    TG_CHECK(strstr(tg_graph_error(g), "parameter 'fc/weight' is [3, 4]") != NULL);
    TG_CHECK(strstr(tg_graph_error(g), "gradient 'grad' is [12]") != NULL);
    tg_graph_destroy(g);

    g = tg_graph_create();
    w = tg_param(g, "w", tg_shape1(4), (tg_init){TG_INIT_ZEROS, 0, 0});
    buf = tg_state(g, "buf", tg_shape1(4), (tg_init){TG_INIT_ZEROS, 0, 0});
    bad = tg_input(g, "labels", TG_I32, tg_shape1(4));
    TG_CHECK(tg_node_create(g, TG_OP_SGD_UPDATE, 3, (tg_tensor *[]){w, buf, bad}, &p) == NULL);
    TG_CHECK(tg_graph_status(g) == TG_ERR_DTYPE);
    TG_CHECK(strstr(tg_graph_error(g), "'labels' of parameter 'w'") != NULL);
    tg_graph_destroy(g);

    /* momentum set but no buffer given */
    g = tg_graph_create();
    w = tg_param(g, "w", tg_shape1(4), (tg_init){TG_INIT_ZEROS, 0, 0});
    tg_tensor *gw = tg_input(g, "gw", TG_F32, tg_shape1(4));
    TG_CHECK(tg_node_create(g, TG_OP_SGD_UPDATE, 2, (tg_tensor *[]){w, gw}, &p) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "takes 3 inputs, got 2") != NULL);
    tg_graph_destroy(g);

    /* SGD params on an Adam op; invalid settings in the params */
    g = tg_graph_create();
    w = tg_param(g, "w", tg_shape1(4), (tg_init){TG_INIT_ZEROS, 0, 0});
    gw = tg_input(g, "gw", TG_F32, tg_shape1(4));
    TG_CHECK(tg_node_create(g, TG_OP_ADAM_UPDATE, 4, (tg_tensor *[]){w, w, w, gw}, &p) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "'sgd'") != NULL);
    tg_graph_destroy(g);
    g = tg_graph_create();
    w = tg_param(g, "w", tg_shape1(4), (tg_init){TG_INIT_ZEROS, 0, 0});
    gw = tg_input(g, "gw", TG_F32, tg_shape1(4));
    o = tg_optimizer_sgd(-1.0f, 0);
    p = tg_optim_params_put(&o);
    TG_CHECK(tg_node_create(g, TG_OP_SGD_UPDATE, 2, (tg_tensor *[]){w, gw}, &p) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "lr") != NULL);
    tg_graph_destroy(g);
}

static void test_infer_result(void)
{
    tg_optimizer o = tg_optimizer_adamw(1e-3f);
    one_update b = build(&o, 5);
    if (b.u) {
        TG_CHECK(b.u->n_in == 4 && b.u->n_mutated == 3);
        TG_CHECK(b.u->shape.ndim == 1 && b.u->shape.dim[0] == 0 && tg_numel(b.u) == 0);
        TG_CHECK(b.u->dtype == TG_F32);
        /* 13 flops per element with decoupled decay's 2 */
        TG_CHECK(tg_op_get(TG_OP_ADAM_UPDATE)->flops(b.u) == 15.0 * 5);
        TG_CHECK(tg_op_get(TG_OP_ADAM_UPDATE)->backward == NULL);
        TG_CHECK(tg_op_get(TG_OP_SGD_UPDATE)->backward == NULL);
    }
    tg_graph_destroy(b.g);
}

int main(void)
{
    make_goldens();
    TG_RUN(test_reference_matches_torch);
    TG_RUN(test_fast_matches_torch);
    TG_RUN(test_sgd_by_hand);
    TG_RUN(test_adam_first_step_is_lr);
    TG_RUN(test_lamb_trust_ratio);
    TG_RUN(test_no_bias_correction_first_step);
    TG_RUN(test_clip_matches_torch);
    TG_RUN(test_fast_vs_reference_threads);
    TG_RUN(test_bf16_native_matches_staged);
    TG_RUN(test_infer_errors);
    TG_RUN(test_infer_result);
    return tg_test_finish();
}
