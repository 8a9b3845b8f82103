"""tilegraph._host_sync - PopTorch's implicit copy of trained weights to the host.

After a training step the weights live in the session; the torch module's
own tensors are stale until copied back. PopTorch copies them when the user
reads them, and so does this: once a trainingModel has run, every module of
the user's model gets a subclass of its own class (same name) whose
parameter and buffer access (model.fc.weight), state_dict(),
parameters()/named_parameters()/buffers() first copy the weights to the host
if a step has run since the last copy, and load_state_dict() also writes the
loaded weights to the session. One copy per read after training,
none per step. Pickling (torch.save(model), copy.deepcopy) gives the
module's own class back.
"""
from __future__ import annotations

import copyreg
import weakref

_owner: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # module -> ref(model)
_subclasses = {}  # original class -> syncing subclass
_originals = {}  # syncing subclass -> original class


def _sync(module):
    ref = _owner.get(module)
    wrapper = ref() if ref is not None else None
    if wrapper is not None and wrapper._weights_dirty:
        wrapper.copyWeightsToHost()


class _Syncing:
    def __getattr__(self, name):
        d = self.__dict__
        if name in d.get("_parameters", ()) or name in d.get("_buffers", ()):
            _sync(self)
        return super().__getattr__(name)

    def state_dict(self, *args, **kwargs):
        _sync(self)
        return super().state_dict(*args, **kwargs)

    def _named_members(self, *args, **kwargs):
        _sync(self)
        return super()._named_members(*args, **kwargs)

    def copyWeightsToHostIfNeeded(self):
        """PopTorch's method on a trained module: copy if a step has run since."""
        ref = _owner.get(self)
        wrapper = ref() if ref is not None else None
        return wrapper.copyWeightsToHostIfNeeded() if wrapper is not None else False

    def load_state_dict(self, *args, **kwargs):
        # The host first holds the latest step (what strict=False leaves
        # alone must not go back in time), then the loaded values, which go
        # to the session too, as PopTorch's load_state_dict on an attached model.
        _sync(self)
        result = super().load_state_dict(*args, **kwargs)
        ref = _owner.get(self)
        wrapper = ref() if ref is not None else None
        if wrapper is not None:
            wrapper.copyWeightsToDevice()
        return result

    def __reduce_ex__(self, protocol):
        # Rebuilt as the module's own class, by the standard library alone:
        # a pickle needs neither tilegraph nor this subclass to load.
        _sync(self)
        getstate = getattr(self, "__getstate__", None)
        state = getstate() if getstate is not None else self.__dict__
        return copyreg._reconstructor, (_originals[type(self)], object, None), state


def _subclass(cls):
    sub = _subclasses.get(cls)
    if sub is None:
        sub = type(cls.__name__, (_Syncing, cls), {"__module__": cls.__module__,
                                                   "__qualname__": cls.__qualname__})
        _subclasses[cls] = sub
        _originals[sub] = cls
    return sub


def install(wrapper):
    """Make reads of wrapper.model's weights copy them from the session first."""
    for m in wrapper.model.modules():
        _owner[m] = weakref.ref(wrapper)
        if type(m) in _originals:
            continue
        try:
            m.__class__ = _subclass(type(m))
        except TypeError:  # a class that cannot be subclassed this way (TorchScript)
            pass


def uninstall(wrapper):
    """Give wrapper.model's modules their own classes back."""
    for m in wrapper.model.modules():
        ref = _owner.get(m)
        if ref is not None and ref() is wrapper:
            del _owner[m]
            cls = _originals.get(type(m))
            if cls is not None:
                m.__class__ = cls
