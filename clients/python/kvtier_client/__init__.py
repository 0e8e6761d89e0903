"""Python client of kvtier serve: the protocol's verbs, KV events, a vLLM-style connector and
a trace driver. Depends only on pyzmq and msgpack (Debian: python3-zmq, python3-msgpack)."""

from .client import (PROTOCOL_VERSION, Admission, Allocation, Client, Hello, Hits, KvtierError,
                     Match, ModelShape, ProbeReply, Prompt, StepReply, StepWork,
                     read_curve_key)
from .connector import KvtierConnectorMetadata, KvtierConnectorScheduler
from .names import server_names
from .events import (AllBlocksCleared, BlockRemoved, BlockStored, DecodeError, EventBatch,
                     EventSubscriber, TierIndex, decode_batch)

__all__ = [
    "PROTOCOL_VERSION", "Admission", "Allocation", "Client", "Hello", "Hits", "KvtierError",
    "Match", "ModelShape", "ProbeReply", "Prompt", "StepReply", "StepWork", "read_curve_key",
    "KvtierConnectorMetadata", "KvtierConnectorScheduler",
    "AllBlocksCleared", "BlockRemoved", "BlockStored", "DecodeError", "EventBatch",
    "EventSubscriber", "TierIndex", "decode_batch", "server_names",
]
__version__ = "0.1.0"
