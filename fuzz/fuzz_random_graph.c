/* fuzz/fuzz_random_graph.c - libFuzzer target for the compiler's fast paths.
 *
 * The input's bytes are the choices of a random graph (tests/tg_random_graph.h:
 * convolutions, batch norm, pooling, views, transposes, channel shuffles,
 * slices, concats, element-wise ops, matmuls), trained one step or run for
 * inference, verified tensor by tensor against the reference kernels
 * (tilegraph/verify.h). A tensor beyond tolerance aborts with the graph
 * printed; so does an error without a message. Every input is a valid
 * graph: the generator only makes shapes its ops accept.
 */
#include "tg_random_graph.h"

#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    /* byte 0 seeds the choices past the input, byte 1 picks training, the
     * threads and the op count; the rest are the first choices */
    tg_rg_spec spec = {.data = data + 2,
                       .size = size - 2,
                       .seed = data[0],
                       .max_ops = 1 + (data[1] >> 2) % 10,
                       .training = data[1] & 1};
    tg_options *o = tg_options_create();
    tg_options_set_int(o, "threadsPerDevice", 1 + (data[1] >> 1) % 2);
    tg_random_graph rg;
    int beyond = -1;
    char why[512];
    tg_status st = tg_random_graph_build(&spec, &rg);
    if (st == TG_OK)
        st = tg_random_graph_check(&rg, o, data[0], &beyond, why, sizeof why);
    if ((st != TG_OK && tg_error_message()[0] == '\0') || beyond >= 0) {
        fprintf(stderr, "random graph fails: %s\n%s", st != TG_OK ? "no message" : why, rg.listing);
        abort();
    }
    if (st != TG_OK) {
        fprintf(stderr, "random graph refused: %s\n", tg_error_message());
        abort(); /* the generator made a graph its ops reject */
    }
    tg_random_graph_destroy(&rg);
    tg_options_destroy(o);
    return 0;
}
