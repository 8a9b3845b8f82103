"""tests/python/test_options.py - poptorch.Options, strategies and DataLoader batching."""
import unittest

from tg_pytest import data, poptorch
import torch


class OptionsTest(unittest.TestCase):
    def test_values_reach_tilegraph_names(self):
        o = poptorch.Options().deviceIterations(10).replicationFactor(2).randomSeed(7)
        o.Training.gradientAccumulation(4)
        o.outputMode(poptorch.OutputMode.All)
        o.TensorLocations.setOptimizerLocation(poptorch.TensorLocationSettings().useOnChipStorage(False))
        o.TensorLocations.numIOTiles(32)
        o.setAvailableMemoryProportion({"IPU0": 0.3, "IPU1": 0.3})
        self.assertEqual(o.values["deviceIterations"], "10")
        self.assertEqual(o.values["replicationFactor"], "2")
        self.assertEqual(o.values["randomSeed"], "7")
        self.assertEqual(o.values["Training.gradientAccumulation"], "4")
        self.assertEqual(o.values["outputMode"], "all")
        self.assertEqual(o.values["TensorLocations.optimizer.onChip"], "false")
        self.assertEqual(o.values["numIOTiles"], "32")
        self.assertEqual(o.values["availableMemoryProportion"], "0.3")

    def test_enums_print_their_names(self):
        # as PopTorch's print (Python 3.11's IntEnum would print the number)
        self.assertEqual(str(poptorch.OutputMode.All), "OutputMode.All")
        self.assertEqual(f"{poptorch.DataLoaderMode.Async}", "DataLoaderMode.Async")
        self.assertEqual(int(poptorch.OutputMode.All), 2)
        self.assertEqual(str(poptorch.ReductionType.Mean), "ReductionType.Mean")
        self.assertEqual(str(poptorch.AutoStage.SameAsIpu), "AutoStage.SameAsIpu")

    def test_every_n_and_strategy(self):
        o = poptorch.Options().outputMode(poptorch.OutputMode.EveryN, 3)
        self.assertEqual((o.values["outputMode"], o.values["outputReturnPeriod"]), ("everyN", "3"))
        o.setExecutionStrategy(poptorch.ShardedExecution("B1", "B2"))
        self.assertEqual(o.values["executionStrategy"], "sharded")
        self.assertEqual([s.ipu_id for s in o.strategy.stages], [0, 1])

    def test_clone_is_independent(self):
        a = poptorch.Options().deviceIterations(5)
        b = a.clone()
        b.deviceIterations(6)
        self.assertEqual(a.values["deviceIterations"], "5")
        a.anchorTensor("x", ".*/Relu_output_0")
        b = a.clone()
        b.anchorTensor("y", ".*")
        self.assertEqual(a.anchors, [("x", ".*/Relu_output_0")])

    def test_bad_values_name_the_poptorch_option(self):
        cases = [
            (lambda: poptorch.Options().deviceIterations(0), "deviceIterations"),
            (lambda: poptorch.Options().replicationFactor("2"), "replicationFactor"),
            (lambda: poptorch.Options().Training.gradientAccumulation(-1), "gradientAccumulation"),
            (lambda: poptorch.Options().outputMode(42), "outputMode"),
            (lambda: poptorch.Options().outputMode(poptorch.OutputMode.EveryN), "EveryN"),
            (lambda: poptorch.Options().setExecutionStrategy("pipelined"), "setExecutionStrategy"),
            (lambda: poptorch.Options().setAvailableMemoryProportion({"IPU0": 7.0}),
             "setAvailableMemoryProportion"),
            (lambda: poptorch.Options().randomSeed(-3), "randomSeed"),
            (lambda: poptorch.Options().TensorLocations.numIOTiles(-1), "numIOTiles"),
            (lambda: poptorch.Options().set("noSuchOption", 1), "noSuchOption"),
            (lambda: poptorch.PipelinedExecution(poptorch.Stage("B1").ipu(1)), "PipelinedExecution"),
            (lambda: poptorch.Stage(), "Stage"),
            (lambda: poptorch.Options().anchorTensor("a b", ".*"), "anchorTensor"),
            (lambda: poptorch.Options().anchorTensor("a", "(["), "anchorTensor('a')"),
            (lambda: poptorch.Options().anchorTensor("a", ".*").anchorTensor("a", "x"),
             "'a' is anchored already"),
            (lambda: poptorch.Options().anchorTensor("a", ".*", poptorch.OutputMode.All),
             "anchors follow the model's outputMode"),
        ]
        for make, name in cases:
            with self.assertRaises(ValueError, msg=name) as cm:
                make()
            self.assertIn(name, str(cm.exception))

    def test_optimizer_arguments_checked(self):
        p = [torch.nn.Parameter(torch.zeros(2))]
        with self.assertRaisesRegex(ValueError, "SGD"):
            poptorch.optim.SGD(p, lr=-1.0)
        with self.assertRaisesRegex(ValueError, "accum_type"):
            poptorch.optim.Adam(p, lr=0.1, accum_type=torch.int32)
        o = poptorch.optim.AdamW(p, lr=0.1, loss_scaling=128, accum_type=torch.float16,
                                 first_order_momentum_accum_type=torch.float32)
        self.assertEqual(o.options(), {"accumType": "f16", "firstOrderMomentumAccumType": "f32",
                                       "lossScaling": "static", "lossScalingFactor": "128"})

    def test_dataloader_combines_batches(self):
        o = poptorch.Options().deviceIterations(3)
        o.Training.gradientAccumulation(2)
        x, y = data(50)
        dl = poptorch.DataLoader(o, torch.utils.data.TensorDataset(x, y), batch_size=4,
                                 mode=poptorch.DataLoaderMode.Async, num_workers=0)
        batches = list(dl)
        self.assertEqual(len(batches), 2)  # 50 // 24; the partial batch is dropped
        self.assertEqual(tuple(batches[0][0].shape), (24, 1, 8, 8))
        self.assertTrue(torch.equal(batches[0][1], y[:24]))


if __name__ == "__main__":
    unittest.main()
