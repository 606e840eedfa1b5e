"""The op vocabulary: importing this package registers every op (see `registry`)."""

from timerl.ops import bincount, elementwise, indexed, movement, reduce, special  # noqa: F401
from timerl.ops.registry import OPS, RULE_KINDS, OpDef, lookup  # noqa: F401
