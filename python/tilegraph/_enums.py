"""tilegraph._enums - the base of the package's PopTorch enums."""
import enum


class NamedIntEnum(enum.IntEnum):
    """An IntEnum that prints as PopTorch's enums do ("OutputMode.All");
    Python 3.11's IntEnum prints the bare value ("2")."""
    __str__ = enum.Enum.__str__
