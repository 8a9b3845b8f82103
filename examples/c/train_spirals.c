/* examples/c/train_spirals.c - train a graph built in C and save it.
 *
 * Builds a small MLP with the public graph API, appends the cross-entropy
 * loss, its backward pass and Adam, compiles it into a session and trains on
 * the two-spirals problem, printing the loss as it goes. With a path, the
 * weights are saved as a safetensors checkpoint that run_checkpoint (or
 * PyTorch) loads.
 *
 *     cc train_spirals.c $(pkg-config --cflags --libs tilegraph) -o train_spirals
 *     ./train_spirals spirals.safetensors
 */
#include "spirals.h"

#include <stdio.h>

static int fail(const char *what)
{
    fprintf(stderr, "train_spirals: %s: %s\n", what, tg_error_message());
    return 1;
}

int main(int argc, char **argv)
{
    if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {
        fprintf(stderr, "usage: train_spirals [CHECKPOINT.safetensors]\n");
        return 2;
    }
    tg_graph *g = tg_graph_create();
    tg_graph_set_training(g, true);
    tg_tensor *points = tg_input(g, "points", TG_F32, tg_shape2(SPIRAL_BATCH, 2));
    tg_tensor *labels = tg_input(g, "labels", TG_I32, tg_shape1(SPIRAL_BATCH));
    tg_tensor *loss = tg_cross_entropy(g, spiral_mlp(g, points), labels);
    tg_tensor_mark_output(loss);
    tg_optimizer adam = tg_optimizer_adam(0.01f);
    if (tg_graph_status(g) != TG_OK || tg_graph_backward(g, loss) != TG_OK ||
        tg_graph_add_optimizer(g, &adam) != TG_OK)
        return fail("building the graph");

    tg_session *s;
    if (tg_session_create(g, NULL, &s) != TG_OK)
        return fail("compiling");
    float xy[SPIRAL_BATCH][2], value = 0;
    int32_t y[SPIRAL_BATCH];
    for (int step = 0; step < 1500; step++) {
        for (int i = 0; i < SPIRAL_BATCH; i++)
            spiral_sample((uint32_t)(step * SPIRAL_BATCH + i), xy[i], &y[i]);
        if (tg_session_write(s, points, xy, sizeof xy) != TG_OK ||
            tg_session_write(s, labels, y, sizeof y) != TG_OK || tg_session_run(s) != TG_OK ||
            tg_session_read(s, loss, &value, sizeof value) != TG_OK)
            return fail("training");
        if (step % 300 == 0 || step == 1499)
            printf("step %4d  loss %.4f\n", step, value);
    }
    if (argc == 2 && tg_checkpoint_save(s, argv[1], "spirals-mlp") != TG_OK)
        return fail("saving");
    if (argc == 2)
        printf("saved %s\n", argv[1]);
    tg_session_destroy(s);
    tg_graph_destroy(g);
    return value < 0.2f ? 0 : 1; /* a model that did not learn is a failure */
}
