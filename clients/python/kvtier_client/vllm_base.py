"""vLLM's connector base class, or a stand-in of the same shape where vLLM is not installed.

The pinned release is vLLM v0.11.0 (docs/vllm.md): ``KVConnectorBase_V1``, ``KVConnectorRole``
and ``KVConnectorMetadata`` of ``vllm/distributed/kv_transfer/kv_connector/v1/base.py``. With
vLLM importable the connector subclasses vLLM's own class, so vLLM's factory accepts it
(``kv_connector_module_path``); without it (this repository's tests: torch and vLLM are not
installed) the stand-in below has the same constructor, role enum and metadata plumbing.
"""

from __future__ import annotations

import enum
from typing import Any, Iterable, Optional, Set, Tuple

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
        """The shape of vLLM v0.11.0's base: its constructor and the metadata plumbing."""

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

        def get_finished(self, finished_req_ids: Set[str]
                         ) -> Tuple[Optional[Set[str]], Optional[Set[str]]]:
            return None, None

        def get_block_ids_with_load_errors(self) -> Set[int]:
            return set()

        def shutdown(self) -> None:
            return None

        def update_connector_output(self, connector_output: Any) -> None:
            return

        def request_finished(self, request: Any, block_ids: list
                             ) -> Tuple[bool, Optional[dict]]:
            return False, None

        def take_events(self) -> Iterable[Any]:
            return ()

__all__ = ["KVConnectorBase_V1", "KVConnectorMetadata", "KVConnectorRole", "VLLM_IMPORTED"]
