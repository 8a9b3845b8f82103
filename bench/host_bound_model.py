"""bench/host_bound_model.py - write a model whose training is bound by the
host's input preparation (bench_instances): one strided 4x4 convolution of
3x256x256 images to 8 channels, global average pooling and a linear layer
to 10 classes, about 1 MFLOP a sample, while resizing a 32x32 image to
256x256 and flipping it costs the host far more.

usage: python3 bench/host_bound_model.py OUT.onnx
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main(out):
    size = 256
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, size, size])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])
    rng = np.random.default_rng(0)

    def tensor(name, shape, scale):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    weights = [tensor("conv.weight", (8, 3, 4, 4), 0.1), tensor("conv.bias", (8,), 0.0),
               tensor("fc.weight", (10, 8), 0.1), tensor("fc.bias", (10,), 0.0)]
    nodes = [
        helper.make_node("Conv", ["x", "conv.weight", "conv.bias"], ["c"], strides=[4, 4],
                         kernel_shape=[4, 4]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["y"], transB=1),
    ]
    graph = helper.make_graph(nodes, "host_bound", [x], [y], weights)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), out)


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        sys.exit(0 if len(sys.argv) == 2 else 2)
    main(sys.argv[1])
