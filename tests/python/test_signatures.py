"""tests/python/test_signatures.py - models called with their own forward signature.

Several tensor inputs of several dtypes, positional and keyword, non-tensor
arguments baked in, tuple and nested outputs, losses computed inside the
model (summed torch losses, token-level cross entropy with ignore_index,
poptorch.identity_loss), int64 narrowing, and the host batch split over
accumulation and iterations for every input. Numbers are compared with
PyTorch running the same module: the forward, and the weights after SGD.
"""
import copy
import unittest

from tg_pytest import poptorch
import torch
import torch.nn as nn
import torch.nn.functional as F

TOL = 1e-5


def sgd(m, lr=0.1):
    return poptorch.optim.SGD(m.parameters(), lr=lr)


def close(test, got, want, what, tol=TOL):
    got, want = torch.as_tensor(got).float(), torch.as_tensor(want).float().detach()
    test.assertEqual(tuple(got.shape), tuple(want.shape), what)
    scale = max(float(want.abs().max()), 1.0)
    err = float((got - want).abs().max()) / scale
    test.assertLessEqual(err, tol, f"{what}: {err:.3g} from PyTorch")


def torch_steps(model, steps, lr):
    """PyTorch's SGD: each step is a list of (args, kwargs) micro-batches whose
    losses' gradients are averaged (tilegraph's gradient accumulation)."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for micro in steps:
        opt.zero_grad()
        for args, kwargs in micro:
            out = model(*args, **kwargs)
            loss = out[0] if isinstance(out, tuple) else out
            (loss / len(micro)).backward()
        opt.step()


def check_weights(test, trained, ref):
    for (name, a), b in zip(trained.named_parameters(), ref.parameters()):
        close(test, a, b, name)


class Mixer(nn.Module):
    """Two float inputs, a keyword scale and an optional bias, tuple outputs
    with a nested list."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 4)
        self.gate = nn.Linear(6, 4)

    def forward(self, a, b, scale=1.0, bias=None):
        h = self.fc(a) * scale + self.gate(b)
        if bias is not None:
            h = h + bias
        return h, [torch.relu(h), h.sum(1)]


class QA(nn.Module):
    """BertForQuestionAnswering's head and loss: start and end logits over
    the sequence, the loss the mean of two cross entropies."""

    def __init__(self, hidden=8):
        super().__init__()
        self.body = nn.Linear(hidden, hidden)
        self.qa_start = nn.Linear(hidden, 1)
        self.qa_end = nn.Linear(hidden, 1)

    def forward(self, hidden_states, attention_mask, start_positions=None, end_positions=None):
        h = torch.tanh(self.body(hidden_states)) * attention_mask.unsqueeze(-1)
        start_logits = self.qa_start(h).squeeze(-1)
        end_logits = self.qa_end(h).squeeze(-1)
        if start_positions is None:
            return start_logits, end_logits
        loss_fct = nn.CrossEntropyLoss()
        total_loss = (loss_fct(start_logits, start_positions) + loss_fct(end_logits, end_positions)) / 2
        return total_loss, start_logits, end_logits


class Tagger(nn.Module):
    """Token classification: labels [B, S] with -100 on padding, the loss over
    logits viewed as [B*S, C] (HF's form) or as [B, C, S] (N-D scores)."""

    def __init__(self, hidden=8, classes=5, nd=False):
        super().__init__()
        self.fc = nn.Linear(hidden, classes)
        self.classes, self.nd = classes, nd

    def forward(self, x, labels):
        logits = self.fc(x)
        if self.nd:
            loss = F.cross_entropy(logits.transpose(1, 2), labels)
        else:
            loss = nn.CrossEntropyLoss()(logits.view(-1, self.classes), labels.view(-1))
        return loss, logits


class Regress(nn.Module):
    """A loss written out and passed to identity_loss, with another scalar output."""

    def __init__(self, reduction="sum"):
        super().__init__()
        self.fc = nn.Linear(6, 3)
        self.reduction = reduction

    def forward(self, x, target):
        out = self.fc(x)
        err = (out - target) ** 2
        return out.mean(), poptorch.identity_loss(err, reduction=self.reduction), out


def mixer_data(n=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 6, generator=g), torch.randn(n, 6, generator=g)


def qa_data(n=4, seq=6, hidden=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, seq, hidden, generator=g)
    mask = torch.ones(n, seq, dtype=torch.int64)
    mask[:, -2:] = 0  # padding
    sp = torch.randint(0, seq - 2, (n,), generator=g)
    ep = torch.randint(0, seq - 2, (n,), generator=g)
    return x, mask, sp, ep


class SignaturesTest(unittest.TestCase):
    def test_two_inputs_keywords_and_nested_outputs(self):
        torch.manual_seed(0)
        m = Mixer()
        a, b = mixer_data()
        bias = torch.randn(4)
        im = poptorch.inferenceModel(copy.deepcopy(m))
        got = im(a, b=b, scale=2.0)
        want = m(a, b, scale=2.0)
        self.assertIsInstance(got, tuple)
        self.assertIsInstance(got[1], list)
        close(self, got[0], want[0], "h")
        close(self, got[1][0], want[1][0], "relu(h)")
        close(self, got[1][1], want[1][1], "h.sum(1)")
        # the same call again (new values), all keyword
        a2, b2 = mixer_data(seed=3)
        got = im(a=a2, b=b2, scale=2.0)
        close(self, got[0], m(a2, b2, scale=2.0)[0], "second call")
        # a non-tensor argument is compiled in: another value is refused
        with self.assertRaisesRegex(ValueError, "argument\\(s\\) scale differ.*detachFromDevice"):
            im(a, b, scale=3.0)
        # a tensor where None was compiled also changes the graph
        with self.assertRaisesRegex(ValueError, "bias differ"):
            im(a, b, 2.0, bias)

    def test_summed_losses_qa(self):
        torch.manual_seed(0)
        m = QA()
        ref = copy.deepcopy(m)
        x, mask, sp, ep = qa_data()
        tm = poptorch.trainingModel(m, None, sgd(m))
        loss, start, end = tm(x, mask, start_positions=sp, end_positions=ep)
        want = ref(x, mask, sp, ep)
        close(self, loss.reshape(()), want[0], "loss")
        close(self, start, want[1], "start_logits")
        close(self, end, want[2], "end_logits")
        torch_steps(ref, [[((x, mask, sp, ep), {})]], 0.1)
        tm.copyWeightsToHost()
        check_weights(self, m, ref)
        # the inference model of the same module: two outputs, no labels
        s2, e2 = poptorch.inferenceModel(m)(x, mask)
        w = ref(x, mask)
        close(self, s2, w[0], "inference start")
        close(self, e2, w[1], "inference end")

    def test_token_level_cross_entropy_ignore_index(self):
        for nd in (False, True):
            torch.manual_seed(1)
            m = Tagger(nd=nd)
            ref = copy.deepcopy(m)
            g = torch.Generator().manual_seed(2)
            x = torch.randn(4, 6, 8, generator=g)
            labels = torch.randint(0, 5, (4, 6), generator=g)
            labels[:, 4:] = -100  # padding, ignored
            labels[0, 0] = -100
            tm = poptorch.trainingModel(m, None, sgd(m, 0.5))
            loss, logits = tm(x, labels)
            want = ref(x, labels)
            close(self, loss.reshape(()), want[0], f"loss (nd={nd})")
            close(self, logits, want[1], f"logits (nd={nd})")
            torch_steps(ref, [[((x, labels), {})]], 0.5)
            tm.copyWeightsToHost()
            check_weights(self, m, ref)

    def test_identity_loss(self):
        for reduction in ("sum", "mean"):
            torch.manual_seed(0)
            m = Regress(reduction)
            ref = copy.deepcopy(m)
            x, target = mixer_data()
            target = target[:, :3]
            tm = poptorch.trainingModel(m, None, sgd(m, 0.05))
            mean, loss, out = tm(x, target)
            want = ref(x, target)
            close(self, mean.reshape(()), want[0], "out.mean()")
            close(self, loss.reshape(()), want[1], f"identity_loss {reduction}")
            close(self, out, want[2], "out")
            # the loss is output 1, marked: not the first scalar
            opt = torch.optim.SGD(ref.parameters(), lr=0.05)
            ref(x, target)[1].backward()
            opt.step()
            tm.copyWeightsToHost()
            check_weights(self, m, ref)

    def test_int_mask_cast_to_float_and_bool(self):
        """An int64 or bool mask the model casts to float is sent as float."""

        class Masked(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(6, 3)

            def forward(self, x, mask):
                return self.fc(x) * mask.float().unsqueeze(-1)

        torch.manual_seed(0)
        m = Masked()
        x, _ = mixer_data()
        for mask in (torch.tensor([1, 0, 2, 1]), torch.tensor([True, False, True, True])):
            got = poptorch.inferenceModel(copy.deepcopy(m))(x, mask)
            close(self, got, m(x, mask), f"{mask.dtype} mask")

    def test_int64_out_of_int32_range(self):
        torch.manual_seed(0)
        m = Tagger()
        x = torch.randn(2, 3, 8)
        labels = torch.zeros(2, 3, dtype=torch.int64)
        tm = poptorch.trainingModel(m, None, sgd(m))
        tm(x, labels)
        labels[1, 2] = 2 ** 40
        with self.assertRaisesRegex(ValueError, f"input 'labels' holds {2 ** 40}, outside int32"):
            tm(x, labels)
        with self.assertRaisesRegex(ValueError, "input 'labels' is torch.float32.*integer"):
            tm(x, labels.float())

    def test_accumulation_and_iterations_split_every_input(self):
        """2 iterations x 2 accumulated micro-batches of 2: every input and
        label is cut the same way, in the order PyTorch's loop takes them."""
        torch.manual_seed(0)
        m = QA()
        ref = copy.deepcopy(m)
        x, mask, sp, ep = qa_data(n=8, seed=4)
        mask[::3, -3] = 0
        o = poptorch.Options().deviceIterations(2).outputMode(poptorch.OutputMode.All)
        o.Training.gradientAccumulation(2)
        tm = poptorch.trainingModel(m, o, sgd(m, 0.2))
        loss, start, end = tm(x, mask, start_positions=sp, end_positions=ep)
        self.assertEqual(tuple(loss.shape), (4,))
        self.assertEqual(tuple(start.shape), (8, 6))
        ref_start = copy.deepcopy(ref)
        # the first micro-batch's outputs are computed before any update
        close(self, start[:2], ref_start(x[:2], mask[:2])[0], "first micro-batch")
        parts = [((x[i:i + 2], mask[i:i + 2], sp[i:i + 2], ep[i:i + 2]), {}) for i in range(0, 8, 2)]
        torch_steps(ref, [parts[:2], parts[2:]], 0.2)
        tm.copyWeightsToHost()
        check_weights(self, m, ref)
        # a host batch split differently between the inputs is refused by name
        with self.assertRaisesRegex(ValueError, "host batches of 8 samples, got 4 in input 'attention_mask'"):
            tm(x, mask[:4], sp, ep)
        # and before compiling, inputs that disagree are named
        m2 = QA()
        with self.assertRaisesRegex(ValueError, "'attention_mask' has 4 samples but 'hidden_states' has 8"):
            poptorch.trainingModel(m2, o, sgd(m2))(x, mask[:4], sp, ep)

    def test_clear_errors(self):
        class DictOut(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(6, 3)

            def forward(self, x):
                return {"logits": self.fc(x)}

        # a dict comes back as a dict (Hugging Face's ModelOutput as its class:
        # test_hf_models.py)
        d = DictOut()
        out = poptorch.inferenceModel(d)(mixer_data()[0])
        self.assertEqual(list(out), ["logits"])
        self.assertTrue(torch.allclose(out["logits"], d(mixer_data()[0])["logits"], atol=1e-6))

        class NameOut(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(6, 3)

            def forward(self, x):
                return {"logits": self.fc(x), "name": "fc"}

        with self.assertRaisesRegex(ValueError, r"output.name is str, not a tensor"):
            poptorch.inferenceModel(NameOut())(mixer_data()[0])

        class TwoScalars(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(6, 3)

            def forward(self, x):
                y = self.fc(x)
                return y.mean(), y.sum()

        m = TwoScalars()
        with self.assertRaisesRegex(ValueError, "returned 2 scalars.*identity_loss"):
            poptorch.trainingModel(m, None, sgd(m))(mixer_data()[0])
        m = Regress("none")
        x, target = mixer_data()
        with self.assertRaisesRegex(ValueError, r"loss \(poptorch.identity_loss, output 1\) has shape "
                                    r"\(4, 3\); the loss must be a scalar"):
            poptorch.trainingModel(m, None, sgd(m))(x, target[:, :3])
        with self.assertRaisesRegex(ValueError, "0-dim tensor"):
            poptorch.inferenceModel(Mixer())(torch.randn(4, 6), torch.tensor(2.0))


if __name__ == "__main__":
    torch.set_num_threads(1)
    unittest.main()
