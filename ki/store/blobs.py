"""Content-addressed blob store on disk (SHA-256), with a streaming size limit.

Spec: insertion-pipeline.md "Fetch" (writes the bytes into the artifact store,
enforcing pipeline.max_file_mb; blobs are content-addressed) and "Failure modes"
(ArtifactTooLarge at Fetch).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import BinaryIO

from ki.core.errors import ArtifactTooLarge

CHUNK_BYTES = 1 << 20


class BlobStore:
    """Blobs under ``root/ab/cd/<sha256>``; writes are atomic (temp file + rename).

    Identical bytes written concurrently converge on one file (the rename of the
    second writer replaces the first with the same content).
    """

    def __init__(self, root: Path):
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)

    def path_for(self, content_hash: str) -> Path:
        """Where the blob with ``content_hash`` (64 hex chars) lives."""
        return self.root / content_hash[:2] / content_hash[2:4] / content_hash

    def exists(self, content_hash: str) -> bool:
        """Whether the blob is on disk."""
        return self.path_for(content_hash).exists()

    def put_stream(self, stream: BinaryIO, *, max_bytes: int) -> tuple[str, int]:
        """Stream ``stream`` into the store, hashing as it goes.

        Returns: (sha256 hex, size in bytes).
        Raises:
            ArtifactTooLarge: more than ``max_bytes`` were read (nothing is kept).
        """
        digest = hashlib.sha256()
        size = 0
        fd, tmp_name = tempfile.mkstemp(dir=self.root, prefix=".incoming-")
        try:
            with os.fdopen(fd, "wb") as out:
                while True:
                    chunk = stream.read(CHUNK_BYTES)
                    if not chunk:
                        break
                    size += len(chunk)
                    if size > max_bytes:
                        raise ArtifactTooLarge(
                            f"file exceeds pipeline.max_file_mb ({max_bytes // (1 << 20)} MB): "
                            f"more than {max_bytes} bytes read",
                            limit_bytes=max_bytes,
                            seen_bytes=size,
                        )
                    digest.update(chunk)
                    out.write(chunk)
            content_hash = digest.hexdigest()
            final = self.path_for(content_hash)
            if final.exists():
                os.unlink(tmp_name)
            else:
                final.parent.mkdir(parents=True, exist_ok=True)
                os.replace(tmp_name, final)
            return content_hash, size
        except BaseException:
            if os.path.exists(tmp_name):
                os.unlink(tmp_name)
            raise

    def put_bytes(self, data: bytes, *, max_bytes: int) -> tuple[str, int]:
        """Store ``data``; see :meth:`put_stream`."""
        import io

        return self.put_stream(io.BytesIO(data), max_bytes=max_bytes)

    def read(self, content_hash: str) -> bytes:
        """The blob's bytes. Raises FileNotFoundError when it is not stored."""
        return self.path_for(content_hash).read_bytes()
