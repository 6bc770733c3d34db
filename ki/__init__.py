"""ki: durable document insertion for a law firm's document estate."""

import os as _os

# onnxruntime (the OCR engine) phones home and writes under $HOME unless told not to, and only
# reads this before its first import: set it before anything can import it.
_os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
