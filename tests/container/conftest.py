"""The container tests run under ``scripts/test_container.sh``, which builds
the images and names them in MEMORO_CONTAINER_IMAGE and
MEMORO_CONTAINER_POSTGRES_IMAGE; in the main suite they are not collected."""

from __future__ import annotations

import os

collect_ignore_glob = [] if os.environ.get("MEMORO_CONTAINER_IMAGE") else ["test_*.py"]
