/* examples/c/run_checkpoint.c - run a saved checkpoint.
 *
 * Builds the same MLP as train_spirals in inference mode, loads the weights
 * from the checkpoint by name and classifies points it never trained on,
 * printing the accuracy. Exits 1 when the checkpoint cannot be read.
 *
 *     ./run_checkpoint spirals.safetensors
 */
#include "spirals.h"

#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc != 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: run_checkpoint CHECKPOINT.safetensors\n");
        return 2;
    }
    tg_graph *g = tg_graph_create();
    tg_tensor *points = tg_input(g, "points", TG_F32, tg_shape2(SPIRAL_BATCH, 2));
    tg_tensor *scores = spiral_mlp(g, points);
    tg_tensor_mark_output(scores);
    tg_session *s = NULL;
    if (tg_graph_status(g) != TG_OK || tg_session_create(g, NULL, &s) != TG_OK ||
        tg_checkpoint_load(s, argv[1], "spirals-mlp") != TG_OK) {
        fprintf(stderr, "run_checkpoint: %s\n", tg_error_message());
        return 1;
    }
    int correct = 0, total = 0;
    for (int batch = 0; batch < 16; batch++) {
        float xy[SPIRAL_BATCH][2], out[SPIRAL_BATCH][2];
        int32_t y[SPIRAL_BATCH];
        for (int i = 0; i < SPIRAL_BATCH; i++) /* samples past the training range */
            spiral_sample(10000000u + (uint32_t)(batch * SPIRAL_BATCH + i), xy[i], &y[i]);
        if (tg_session_write(s, points, xy, sizeof xy) != TG_OK || tg_session_run(s) != TG_OK ||
            tg_session_read(s, scores, out, sizeof out) != TG_OK) {
            fprintf(stderr, "run_checkpoint: %s\n", tg_error_message());
            return 1;
        }
        for (int i = 0; i < SPIRAL_BATCH; i++, total++)
            correct += (out[i][1] > out[i][0]) == (y[i] == 1);
    }
    printf("accuracy on %d unseen points: %.1f%%\n", total, 100.0 * correct / total);
    tg_session_destroy(s);
    tg_graph_destroy(g);
    return 0;
}
