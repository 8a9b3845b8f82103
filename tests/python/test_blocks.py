"""tests/python/test_blocks.py - Block/BeginBlock and how they become tilegraph stages.

Staging is checked through what the library does with it: a pipeline over
N stages refuses fewer than N micro-batches (its message names the stage
count), and a pipelined or sharded run must give the single-device losses.
"""
import unittest

from tg_pytest import WithLoss, data, net, poptorch
import torch
import torch.nn as nn

from tilegraph import TilegraphError


def train(model, options, steps=2, n=16):
    x, y = data(n)
    tm = poptorch.trainingModel(WithLoss(model), options, poptorch.optim.SGD(model.parameters(), lr=0.1))
    return torch.cat([tm(x, y)[1] for _ in range(steps)]), tm


def opts(accumulation, strategy=None):
    # one thread per device, given: the default shares the cores over the
    # devices, so one device would take two and sum in another order than
    # the pipelined runs' devices it is compared with bit for bit
    o = poptorch.Options().outputMode(poptorch.OutputMode.All).set("threadsPerDevice", 1)
    o.Training.gradientAccumulation(accumulation)
    if strategy is not None:
        o.setExecutionStrategy(strategy)
    return o


def stages(n):
    return [poptorch.Stage(f"B{i + 1}").ipu(i) for i in range(n)]


class Stack(nn.Module):
    """Layers in an nn.ModuleList, a recomputation checkpoint after the second."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(8, 8) for _ in range(4)])
        self.head = nn.Linear(8, 3)

    def forward(self, x, labels):
        for i, layer in enumerate(self.layers):
            x = torch.tanh(layer(x))
            if i == 1:
                x = poptorch.recomputationCheckpoint(x)
        out = self.head(x)
        return out, nn.functional.cross_entropy(out, labels)


class BlocksTest(unittest.TestCase):
    def test_begin_block_in_module_list_and_checkpoint(self):
        g = torch.Generator().manual_seed(3)
        x, y = torch.randn(16, 8, generator=g), torch.randint(0, 3, (16,), generator=g)

        def run(accumulation, begin, recompute):
            torch.manual_seed(0)
            m = Stack()
            if begin:
                poptorch.BeginBlock(m.layers[2], "B1", ipu_id=1)
            o = opts(accumulation)
            if recompute:
                o.set("recomputation", "pipeline")
            tm = poptorch.trainingModel(m, o, poptorch.optim.SGD(m.parameters(), lr=0.1))
            return torch.cat([tm(x, y)[1] for _ in range(2)]), tm

        single, _ = run(4, False, False)
        piped, tm = run(4, True, True)
        self.assertEqual(tm._placement_values.get("split"), "m.layers.2")
        self.assertEqual(len(tm._checkpoints), 1)  # the checkpoint reached the graph
        self.assertTrue(torch.allclose(single, piped, atol=1e-5), (single, piped))
        # self.layers[2] really starts a second stage
        with self.assertRaisesRegex(TilegraphError, "over 2 stages"):
            run(1, True, False)

    def test_four_stages_from_four_blocks(self):
        with self.assertRaisesRegex(TilegraphError, "over 4 stages"):
            train(net(), opts(2, poptorch.PipelinedExecution(*stages(4))))

    def test_grouped_stages(self):
        s = poptorch.PipelinedExecution(poptorch.Stage("B1", "B2").ipu(0), poptorch.Stage("B3", "B4").ipu(1))
        with self.assertRaisesRegex(TilegraphError, "over 2 stages"):
            train(net(), opts(1, s), n=8)
        train(net(), opts(2, s))  # two micro-batches fill two stages

    def test_strategy_naming_no_stages(self):
        """PipelinedExecution() (PopTorch's default AutoStage): blocks naming
        no devices get a stage each, so 2 micro-batches cannot fill the 4,
        and 4 give the one-device losses; ShardedExecution() the same."""
        with self.assertRaisesRegex(TilegraphError, "over 4 stages"):
            train(net(), opts(2, poptorch.PipelinedExecution()))
        single, _ = train(net(), opts(4))
        piped, _ = train(net(), opts(4, poptorch.PipelinedExecution()))
        sharded, _ = train(net(), opts(4, poptorch.ShardedExecution()))
        self.assertTrue(torch.allclose(single, piped, atol=1e-5))
        self.assertTrue(torch.allclose(single, sharded, atol=1e-5))

    def test_pipelined_and_sharded_match_one_device(self):
        single, _ = train(net(), opts(4))
        piped, _ = train(net(), opts(4, poptorch.PipelinedExecution("B1", "B2", "B3", "B4")))
        sharded, _ = train(net(), opts(4, poptorch.ShardedExecution(*stages(4))))
        self.assertTrue(torch.allclose(single, piped, atol=1e-5))
        self.assertTrue(torch.allclose(single, sharded, atol=1e-5))
        self.assertLess(single[-1].item(), single[0].item() + 1.0)

    def test_phased_with_tensors_off_chip_matches_one_device(self):
        """PhasedExecution with every TensorLocations kind off chip gives the one-device
        losses bit for bit (streamed copies move bytes, never change them)."""
        def off(o):
            off_chip = poptorch.TensorLocationSettings().useOnChipStorage(False)
            o.TensorLocations.setWeightLocation(off_chip)
            o.TensorLocations.setActivationLocation(off_chip)
            o.TensorLocations.setAccumulatorLocation(off_chip)
            o.TensorLocations.setOptimizerLocation(off_chip)
            return o

        torch.manual_seed(0)
        single, _ = train(net(), opts(4))
        phased = poptorch.PhasedExecution(poptorch.Phase("B1"), poptorch.Phase("B2"),
                                          poptorch.Phase(poptorch.Stage("B3"), poptorch.Stage("B4")))
        phased.setTensorsLiveness(poptorch.Liveness.OffChipAfterFwd)
        torch.manual_seed(0)
        streamed, tm = train(net(), off(opts(4, phased)))
        self.assertEqual(tm._placement_values.get("phases"), "S0|S1|S2,S3")
        self.assertTrue(torch.equal(single, streamed), (single, streamed))
        torch.manual_seed(0)
        located, _ = train(net(), off(opts(4)))  # locations alone, one device
        self.assertTrue(torch.equal(single, located))
        # the last two phases on a second device: the same losses again
        two = poptorch.PhasedExecution(poptorch.Phase("B1"), poptorch.Phase("B2"),
                                       poptorch.Phase(poptorch.Stage("B3").ipu(1)),
                                       poptorch.Phase(poptorch.Stage("B4").ipu(1)))
        torch.manual_seed(0)
        spread, tm = train(net(), off(opts(4, two)))
        self.assertEqual(tm._placement_values.get("phases"), "S0|S1|S2@1|S3@1")
        self.assertTrue(torch.equal(single, spread), (single, spread))
        with self.assertRaisesRegex(ValueError, "runs a phase on one device"):
            poptorch.Phase(poptorch.Stage("B1").ipu(0), poptorch.Stage("B2").ipu(1))
        with self.assertRaisesRegex(ValueError, "sharding of the activation tensors"):
            poptorch.Options().TensorLocations.setActivationLocation(
                poptorch.TensorLocationSettings().useReplicatedTensorSharding(True))

    def test_parallel_phased_matches_one_device(self):
        """ParallelPhasedExecution: the phases alternate over two devices (even ones on
        device 0, odd ones on device 1), values crossing both ways inside each pass; with
        everything in streaming memory, preloaded on the I/O threads, the one-device losses
        and weights bit for bit."""
        def run(strategy):
            o = opts(4, strategy)
            if strategy is not None:
                off_chip = poptorch.TensorLocationSettings().useOnChipStorage(False)
                o.TensorLocations.setWeightLocation(off_chip)
                o.TensorLocations.setActivationLocation(off_chip)
                o.TensorLocations.setOptimizerLocation(off_chip)
                o.set("TensorLocations.ioSchedule", "preload")
            torch.manual_seed(0)
            model = net()
            losses, tm = train(model, o, steps=3)
            tm.copyWeightsToHost()
            return losses, [p.detach().clone() for p in model.parameters()], tm

        single, w_single, _ = run(None)
        alternated, w_alternated, tm = run(poptorch.ParallelPhasedExecution("B1", "B2", "B3", "B4"))
        self.assertEqual(tm._placement_values.get("phasedExecutionType"), "ParallelIPU")
        self.assertTrue(torch.equal(single, alternated), (single, alternated))
        for a, b in zip(w_single, w_alternated):
            self.assertTrue(torch.equal(a, b))
        self.assertFalse(torch.equal(w_single[0], next(net().parameters())))  # training moved them
        contradicting = poptorch.ParallelPhasedExecution(
            "B1", "B2", poptorch.Phase(poptorch.Stage("B3").ipu(1)), "B4")
        with self.assertRaisesRegex(TilegraphError, "phase 2 names device 1, but "
                                    "phasedExecutionType ParallelIPU runs even phases on device 0"):
            train(net(), opts(4, contradicting))

    def test_weights_sharded_over_replicas_match_unsharded(self):
        """Replicated tensor sharding of the weights (each replica keeps half of every weight
        and gathers it for each pass), on chip and in streaming memory (seed 002 §4.4's RTS
        "off chip"), gives the unsharded replicas' losses and weights bit for bit."""
        def run(shard, on_chip=True):
            o = opts(2).replicationFactor(2)
            if shard:
                o.TensorLocations.setWeightLocation(
                    poptorch.TensorLocationSettings().useReplicatedTensorSharding(True)
                    .minElementsForReplicatedTensorSharding(0).useOnChipStorage(on_chip))
                self.assertEqual(o.values["TensorLocations.weight.onChip"], str(on_chip).lower())
            model = net()
            losses, tm = train(model, o, steps=3)
            tm.copyWeightsToHost()
            return losses, [p.detach().clone() for p in model.parameters()]

        plain, w_plain = run(False)
        sharded, w_sharded = run(True)
        self.assertTrue(torch.equal(plain, sharded), (plain, sharded))
        self.assertEqual(len(w_plain), len(w_sharded))
        for a, b in zip(w_plain, w_sharded):
            self.assertTrue(torch.equal(a, b))
        self.assertFalse(torch.equal(w_plain[0], next(net().parameters())))  # training moved them
        off_chip, w_off_chip = run(True, on_chip=False)
        self.assertTrue(torch.equal(plain, off_chip), (plain, off_chip))
        for a, b in zip(w_plain, w_off_chip):
            self.assertTrue(torch.equal(a, b))

    def test_unknown_and_missing_blocks(self):
        bad = poptorch.PipelinedExecution(poptorch.Stage("B1", "B2", "B3").ipu(0), poptorch.Stage("B9").ipu(1))
        with self.assertRaisesRegex(ValueError, "B9"):
            train(net(), opts(4, bad))
        partial = poptorch.PipelinedExecution(poptorch.Stage("B1", "B2").ipu(0), poptorch.Stage("B3").ipu(1))
        with self.assertRaisesRegex(ValueError, "B4 are in no poptorch.Stage"):
            train(net(), opts(4, partial))

    def test_auto_staging_by_ipu_id(self):
        class Auto(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Linear(64, 8)
                self.b = nn.Linear(8, 8)
                self.c = nn.Linear(8, 5)

            def forward(self, x):
                x = x.flatten(1)
                with poptorch.Block(ipu_id=0):
                    x = torch.relu(self.a(x))
                with poptorch.Block(ipu_id=1):
                    x = torch.relu(self.b(x))
                    x = self.c(x)
                return x

        torch.manual_seed(0)
        with self.assertRaisesRegex(TilegraphError, "over 2 stages"):
            train(Auto(), opts(1), n=8)
        torch.manual_seed(0)
        auto, _ = train(Auto(), opts(2))
        torch.manual_seed(0)
        m = Auto()
        x, y = data(16)
        ref = nn.functional.cross_entropy(m(x[:8]), y[:8])
        self.assertAlmostEqual(auto[0].item(), ref.item(), places=5)

    def test_begin_block(self):
        class Plain(nn.Module):  # Small's layers without Block contexts
            def __init__(self):
                super().__init__()
                self.conv1, self.conv2 = nn.Conv2d(1, 4, 3), nn.Conv2d(4, 4, 3)
                self.fc1, self.fc2 = nn.Linear(64, 16), nn.Linear(16, 5)

            def forward(self, x):
                x = torch.relu(self.conv2(torch.relu(self.conv1(x))))
                return self.fc2(torch.relu(self.fc1(x.flatten(1))))

        m = Plain()
        poptorch.BeginBlock(m.conv1, "S1", ipu_id=0)
        poptorch.BeginBlock(m.fc1, "S2", ipu_id=1)
        with self.assertRaisesRegex(TilegraphError, "over 2 stages"):
            train(m, opts(1), n=8)
        train(m, opts(2))
        # Seed 003's way: one BeginBlock further on; what runs before it is
        # the first block, on device 0, as in PopTorch
        m = Plain()
        poptorch.BeginBlock(m.fc1, ipu_id=1)
        with self.assertRaisesRegex(TilegraphError, "over 2 stages"):
            train(m, opts(1), n=8)
        train(m, opts(2))

    def test_block_without_module_is_refused(self):
        class NoModule(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(64, 5)

            def forward(self, x):
                with poptorch.Block("B1"):
                    x = self.fc(x.flatten(1))
                with poptorch.Block("B2"):
                    x = x * 2
                return x

        with self.assertRaisesRegex(ValueError, "Block \"B2\".*no torch.nn.Module"):
            train(NoModule(), opts(2, poptorch.PipelinedExecution("B1", "B2")))


class GrandparentCall(nn.Module):
    """nanoGPT's shape: transformer.h, a ModuleList, called from the model's own forward."""

    def __init__(self):
        super().__init__()
        self.transformer = nn.ModuleDict({"h": nn.ModuleList([nn.Linear(8, 8) for _ in range(4)])})
        self.head = nn.Linear(8, 3)
        self.loss = nn.CrossEntropyLoss()

    def forward(self, x, y):
        for layer in self.transformer.h:
            x = torch.relu(layer(x))
        o = self.head(x)
        return o, self.loss(o, y)


class CausalSelfAttention(nn.Module):
    """nanoGPT's attention, its causal mask a registered float buffer."""

    def __init__(self, d, heads, seq):
        super().__init__()
        self.c_attn, self.c_proj, self.heads = nn.Linear(d, 3 * d), nn.Linear(d, d), heads
        self.register_buffer("bias", torch.tril(torch.ones(seq, seq)).view(1, 1, seq, seq))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2)
                   for z in self.c_attn(x).split(c, dim=2))
        att = (q @ k.transpose(-2, -1)) * (c // self.heads) ** -0.5
        att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        y = torch.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))


class NanoBlock(nn.Module):
    def __init__(self, d, heads, seq):
        super().__init__()
        self.ln_1, self.attn, self.ln_2 = nn.LayerNorm(d), CausalSelfAttention(d, heads, seq), nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class NanoGPT(nn.Module):
    """nanoGPT's structure: transformer.h, a ModuleList, run from the model's forward."""

    def __init__(self, vocab=16, d=16, heads=2, seq=8, layers=4):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab, d), wpe=nn.Embedding(seq, d),
            h=nn.ModuleList([NanoBlock(d, heads, seq) for _ in range(layers)]), ln_f=nn.LayerNorm(d)))
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx, targets):
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(idx.size(1)))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        return logits, nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


class AnySubmoduleTest(unittest.TestCase):
    def test_nanogpt_pipelined_by_transformer_h(self):
        """issue 41: BeginBlock(transformer.h[i]) over four devices trains as
        PyTorch does, and each block's causal-mask buffer stays as it was."""
        import copy
        from tilegraph._lib import lib
        torch.manual_seed(0)
        m = NanoGPT()
        ref = copy.deepcopy(m)
        for i in range(1, 4):
            poptorch.BeginBlock(m.transformer.h[i], ipu_id=i)
        o = poptorch.Options()
        o.Training.gradientAccumulation(4)
        tm = poptorch.trainingModel(m, o, torch.optim.SGD(m.parameters(), lr=0.1))
        opt = torch.optim.SGD(ref.parameters(), lr=0.1)
        idx, targets = torch.randint(0, 16, (8, 8)), torch.randint(0, 16, (8, 8))
        for _ in range(3):
            tm(idx, targets)
            opt.zero_grad()
            ref(idx, targets)[1].backward()
            opt.step()
        self.assertEqual(lib.tg_session_devices(tm._handle), 4)
        got, want = m.state_dict(), ref.state_dict()
        for k, v in want.items():
            self.assertLess((got[k] - v).abs().max().item(), 1e-6, k)
        for i in range(4):
            self.assertTrue(torch.equal(got[f"transformer.h.{i}.attn.bias"],
                                        torch.tril(torch.ones(8, 8)).view(1, 1, 8, 8)))

    def test_begin_block_on_a_module_called_from_its_grandparent(self):
        """issue 41: BeginBlock(transformer.h[i]) pipelines over the devices
        and trains as the single-device model does."""
        torch.manual_seed(0)
        x, y = torch.randn(8, 8), torch.randint(0, 3, (8,))
        results = []
        for blocks in (False, True):
            torch.manual_seed(1)
            m = GrandparentCall()
            if blocks:
                poptorch.BeginBlock(m.transformer.h[1], ipu_id=1)
                poptorch.BeginBlock(m.transformer.h[3], ipu_id=2)
            o = poptorch.Options()
            o.Training.gradientAccumulation(4)
            tm = poptorch.trainingModel(m, o, poptorch.optim.SGD(m.parameters(), lr=0.1))
            losses = torch.cat([tm(x, y)[1] for _ in range(2)])
            results.append((losses, m.head.weight.detach().clone()))
            from tilegraph._lib import lib
            self.assertEqual(lib.tg_session_devices(tm._handle), 3 if blocks else 1)
        self.assertTrue(torch.allclose(results[0][0], results[1][0], atol=1e-6))
        self.assertTrue(torch.allclose(results[0][1], results[1][1], atol=1e-6))

    def test_auto_stage_strategies(self):
        """PipelinedExecution() and PipelinedExecution(AutoStage.X) stage the
        blocks by their ipu ids, as PopTorch's default does."""
        torch.manual_seed(0)
        x, y = torch.randn(8, 8), torch.randint(0, 3, (8,))
        from tilegraph._lib import lib
        losses = []
        for strategy in (poptorch.PipelinedExecution(),
                         poptorch.PipelinedExecution(poptorch.AutoStage.SameAsIpu),
                         poptorch.PipelinedExecution(poptorch.AutoStage.AutoIncrement)):
            torch.manual_seed(1)
            m = GrandparentCall()
            poptorch.BeginBlock(m.transformer.h[0], ipu_id=0)
            poptorch.BeginBlock(m.transformer.h[2], ipu_id=1)
            o = poptorch.Options().setExecutionStrategy(strategy)
            o.Training.gradientAccumulation(4)
            tm = poptorch.trainingModel(m, o, poptorch.optim.SGD(m.parameters(), lr=0.1))
            losses.append(tm(x, y)[1])
            self.assertEqual(lib.tg_session_devices(tm._handle), 2)
        self.assertTrue(all(torch.equal(losses[0], v) for v in losses))
        torch.manual_seed(1)
        m = GrandparentCall()
        poptorch.BeginBlock(m.transformer.h[0], ipu_id=1)
        poptorch.BeginBlock(m.transformer.h[2], ipu_id=0)
        o = poptorch.Options().setExecutionStrategy(
            poptorch.PipelinedExecution(poptorch.AutoStage.AutoIncrement))
        o.Training.gradientAccumulation(4)
        tm = poptorch.trainingModel(m, o, poptorch.optim.SGD(m.parameters(), lr=0.1))
        with self.assertRaisesRegex(TilegraphError, "AutoIncrement.*on devices \\[1, 0\\]"):
            tm(x, y)

    def test_errors_name_the_users_modules(self):
        """No error names the package's wrapper ('m.' or '/m/')."""
        from tilegraph._lib import user_names
        self.assertEqual(user_names("split point 'm.encoder.layer.1', node '/m/head/Gemm', "
                                    "'m/cross_entropy' in 'model.onnx'"),
                         "split point 'encoder.layer.1', node '/head/Gemm', "
                         "'cross_entropy' in 'model.onnx'")


if __name__ == "__main__":
    unittest.main()
