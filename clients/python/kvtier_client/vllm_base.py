"""vLLM's connector base class, or a stand-in of the same shape where vLLM is not installed.

With vLLM importable the connector subclasses vLLM's own ``KVConnectorBase_V1`` (so vLLM's
factory accepts it through ``kv_connector_module_path``) and inherits every default hook of the
installed release. Without it (this repository's tests: torch and vLLM are not installed) the
stand-in below has the constructor, role enum, metadata plumbing and default hooks of the
newest release read (docs/vllm.md, "The releases"): ``vllm/distributed/kv_transfer/
kv_connector/v1/base.py``. Optional names of later releases (``SupportsHMA``,
``KVConnectorStats``) are imported where they exist.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Optional, Set, Tuple

try:  # pragma: no cover - exercised only where vLLM is installed
    from vllm.distributed.kv_transfer.kv_connector.v1.base import (  # type: ignore
        KVConnectorBase_V1, KVConnectorMetadata, KVConnectorRole)
    VLLM_IMPORTED = True
except Exception:  # ImportError, or a vLLM whose import fails without a GPU
    VLLM_IMPORTED = False

    class KVConnectorRole(enum.Enum):  # type: ignore[no-redef]
        SCHEDULER = 0
        WORKER = 1

    class KVConnectorMetadata:  # type: ignore[no-redef]
        """What the scheduler side hands the worker side each step."""

    class KVConnectorBase_V1:  # type: ignore[no-redef]
        """The shape of vLLM's base: its constructor, the metadata plumbing and the default of
        every hook a connector may leave alone, in both generations (docs/vllm.md)."""

        def __init__(self, vllm_config: Any, role: KVConnectorRole,
                     kv_cache_config: Any = None):
            self._connector_metadata: Optional[KVConnectorMetadata] = None
            self._vllm_config = vllm_config
            self._kv_transfer_config = getattr(vllm_config, "kv_transfer_config", None)
            if self._kv_transfer_config is None:
                raise ValueError("kv_transfer_config must be set for KVConnectorBase_V1")
            self._kv_cache_config = kv_cache_config
            self._role = role

        @property
        def role(self) -> KVConnectorRole:
            return self._role

        @property
        def prefer_cross_layer_blocks(self) -> bool:
            return False

        # -- worker side ------------------------------------------------------------------------
        def bind_connector_metadata(self, connector_metadata: KVConnectorMetadata) -> None:
            self._connector_metadata = connector_metadata

        def clear_connector_metadata(self) -> None:
            self._connector_metadata = None

        def _get_connector_metadata(self) -> KVConnectorMetadata:
            assert self._connector_metadata is not None
            return self._connector_metadata

        def has_connector_metadata(self) -> bool:
            return self._connector_metadata is not None

        def register_kv_caches(self, kv_caches: dict) -> None:
            return

        def register_cross_layers_kv_cache(self, kv_cache: Any, attn_backend: Any) -> None:
            return

        def set_host_xfer_buffer_ops(self, copy_operation: Any) -> None:
            return

        def handle_preemptions(self, kv_connector_metadata: Any) -> None:
            return

        def get_finished(self, finished_req_ids: Set[str]
                         ) -> Tuple[Optional[Set[str]], Optional[Set[str]]]:
            return None, None

        def get_block_ids_with_load_errors(self) -> Set[int]:
            return set()

        def get_kv_connector_kv_cache_events(self) -> Any:
            return None

        def build_connector_worker_meta(self) -> Any:
            return None

        def shutdown(self) -> None:
            return None

        # -- scheduler side ---------------------------------------------------------------------
        def bind_gpu_block_pool(self, gpu_block_pool: Any) -> None:
            return

        def on_new_request(self, request: Any) -> None:
            return

        def update_connector_output(self, connector_output: Any) -> None:
            return

        def request_finished(self, request: Any, block_ids: list
                             ) -> Tuple[bool, Optional[dict]]:
            return False, None

        def take_events(self) -> Iterable[Any]:
            return ()

        def has_pending_push_work(self) -> bool:
            return False

        def reset_cache(self) -> Optional[bool]:
            return None

        def get_kv_connector_stats(self) -> Any:
            return None

        @classmethod
        def build_kv_connector_stats(cls, data: Optional[dict] = None) -> Any:
            return None

        @classmethod
        def get_required_kvcache_layout(cls, vllm_config: Any) -> Optional[str]:
            return None

        def get_finished_count(self) -> Optional[int]:
            return None

try:  # pragma: no cover - vLLM with the hybrid allocator's interface
    from vllm.distributed.kv_transfer.kv_connector.v1.base import SupportsHMA  # type: ignore
except Exception:
    SupportsHMA = None  # type: ignore[assignment,misc]

try:  # pragma: no cover - vLLM with connector stats
    from vllm.distributed.kv_transfer.kv_connector.v1.metrics import (  # type: ignore
        KVConnectorStats)
except Exception:
    @dataclass
    class KVConnectorStats:  # type: ignore[no-redef]
        """The shape of vLLM's KVConnectorStats: a dict the workers' copies are summed into."""
        data: Dict[str, Any] = field(default_factory=dict)


__all__ = ["KVConnectorBase_V1", "KVConnectorMetadata", "KVConnectorRole", "KVConnectorStats",
           "SupportsHMA", "VLLM_IMPORTED"]
