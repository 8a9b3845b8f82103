"""tilegraph.anchors - PopTorch's anchorTensor: values inside the graph read back after a run.

Options.anchorTensor(short_name, long_name) names values of the exported
ONNX graph by a regular expression, matched in full against their names as
the package's errors show them (the exporter's module scopes, the wrapper's
"/m" dropped: "/layer1/layer1.0/conv1/Conv_output_0"). Each anchor becomes
ONE extra graph output: the values' dims (Shape, as floats: exact below
2^24), then the values flattened (Reshape to [-1]), concatenated in node
order, so that any number of values takes one of the importer's output slots
(TG_ONNX_MAX_IO); the package splits the read-back vector into the values
again. The dims come from the graph because the export often knows only a
value's rank (dims computed from the input's shape). The session keeps the
output as it keeps the model's own, so an anchor reads in training as in
inference, under the model's outputMode (one copy per micro-batch for All,
per replica for Final).

What it is for: stochastic depth draws its masks inside the graph (dropout
of ones, tilegraph.model._stochastic_depth); anchoring
".*/stochastic_depth(_[0-9]+)?/Dropout(_[0-9]+)?_output_0" (a module's
second call is scoped "stochastic_depth_1") returns each mask of a training
step, already scaled by 1 / (1 - p), which PyTorch can then replay.
"""
import collections
import re

import numpy as np
import onnx
from onnx import helper, numpy_helper


def display_name(name):
    """A value's name as errors show it: without the wrapper's "/m" scope."""
    return "/" + name[3:] if name.startswith("/m/") else name


class Anchor:
    """One anchor as added to the file: its output's name and its values' (name, rank)."""

    def __init__(self, short_name, output, pieces):
        self.short_name, self.output, self.pieces = short_name, output, pieces

    def split(self, flat, count):
        """The values from the read-back vector [count * (dims + total)], each
        shaped as outputs are ([count * dim0, ...], or [count] for a scalar)."""
        rows = flat.reshape(count, -1)
        at = sum(rank for _, rank in self.pieces)
        dims = [int(d) for d in rows[0, :at]]
        out = collections.OrderedDict()
        for name, rank in self.pieces:
            shape, dims = dims[:rank], dims[rank:]
            n = int(np.prod(shape, dtype=np.int64))
            v = rows[:, at:at + n].reshape((count,) + tuple(shape))
            out[name] = v.reshape((count * shape[0],) + tuple(shape[1:])) if shape else v.reshape(count)
            at += n
        return out


def _shapes(model):
    """Each value's (element type, rank or None) from the file's value_info,
    after ONNX's own shape inference."""
    try:
        model = onnx.shape_inference.infer_shapes(model)
    except Exception:  # shapes from the exporter alone then
        pass
    g = model.graph
    out = {}
    for vi in list(g.value_info) + list(g.output) + list(g.input):
        tt = vi.type.tensor_type
        out[vi.name] = (tt.elem_type, len(tt.shape.dim) if tt.HasField("shape") else None)
    return out


def add_to_file(path, anchors, what):
    """Add an output per (short_name, pattern) of `anchors` to the ONNX file
    at `path`; returns the Anchor list, in the order of the outputs added."""
    if not anchors:
        return []
    model = onnx.load(path)
    g = model.graph
    values = [o for n in g.node for o in n.output if o]
    shapes = _shapes(model)
    plans = []
    for short_name, pattern in anchors:
        rx = re.compile(pattern)
        names = [v for v in values if rx.fullmatch(display_name(v))]
        if not names:
            some = ", ".join(display_name(v) for v in values[:3])
            raise ValueError(f"{what}: anchorTensor('{short_name}', {pattern!r}) matches no value of "
                             f"the exported graph (its names are the exporter's, such as {some}); "
                             "in an inference model, training-only values (dropout, stochastic "
                             "depth) are not in the graph")
        pieces = []
        for v in names:
            elem, rank = shapes.get(v, (None, None))
            if rank is None or elem != onnx.TensorProto.FLOAT:
                raise ValueError(f"{what}: anchorTensor('{short_name}'): value '{display_name(v)}' "
                                 + ("has no known rank in the export" if rank is None
                                    else "is not float32") + "; anchor float tensors")
            pieces.append((display_name(v), rank))
        output = f"anchor.{short_name}"
        minus_one = f"{output}.minus_one"
        g.initializer.append(numpy_helper.from_array(np.array([-1], np.int64), minus_one))
        dims, flat = [], []
        for k, v in enumerate(names):
            dims.append(f"{output}.dims{k}")
            g.node.append(helper.make_node("Shape", [v], [dims[-1]], name=f"{output}/Shape_{k}"))
            flat.append(f"{output}.{k}")
            g.node.append(helper.make_node("Reshape", [v, minus_one], [flat[-1]],
                                           name=f"{output}/Reshape_{k}"))
        g.node.append(helper.make_node("Concat", dims, [f"{output}.dims"], name=f"{output}/Dims",
                                       axis=0))
        g.node.append(helper.make_node("Cast", [f"{output}.dims"], [f"{output}.fdims"],
                                       name=f"{output}/Cast", to=onnx.TensorProto.FLOAT))
        g.node.append(helper.make_node("Concat", [f"{output}.fdims"] + flat, [output],
                                       name=f"{output}/Concat", axis=0))
        g.output.append(helper.make_tensor_value_info(output, onnx.TensorProto.FLOAT, [None]))
        plans.append(Anchor(short_name, output, pieces))
    onnx.save(model, path)
    return plans
