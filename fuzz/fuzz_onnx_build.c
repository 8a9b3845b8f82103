/* fuzz/fuzz_onnx_build.c - libFuzzer target for the ONNX graph builder and
 * the compiler behind it (issue 32 item 29: the loader alone was fuzzed,
 * while the hangs of a pooling window over 2^40 rows and the quadratic
 * naming of same-named nodes lived in import and planning).
 *
 * Any input that loads is built, for inference and for training, and what
 * builds is compiled (onnx_build_check.h, which the suite's replay of the
 * corpus shares); no crash, sanitizer report, leak or hang. Sizes are bounded by the input
 * itself (libFuzzer's -max_len) and by the library's own limits (2^36
 * elements a tensor, the memory limit), which is what is being tested:
 * run with -rss_limit_mb=2048 -timeout=20 so that an allocation or a loop
 * the limits fail to stop is reported.
 */
#include "onnx_build_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tg_fuzz_onnx_build_one(data, size);
    return 0;
}
