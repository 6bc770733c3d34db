"""The optional converter components of this install, as ``ki status`` and the console report them.

DESIGN.md "Converter routing" (capabilities): each optional converter says whether it is available here and
what it adds; one that is configured but absent says what waits for it and what to install. Detected when
asked (``ki status``, ``/healthz``) and when a run starts (the capability release of
:mod:`ki.orchestration.prepare`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ki.config.settings import KiConfig

LEGACY_FORMATS = ".doc .dot .ppt .pps .pot .wpd .wps .pages"


@dataclass(frozen=True)
class ConverterComponent:
    """One optional converter: ``name``, whether it is ``available``, what it ``adds`` (formats) and, when it
    is configured but absent, ``missing`` (what waits for it and what to install)."""

    name: str
    available: bool
    adds: str
    missing: str | None = None

    def as_dict(self) -> dict:
        """The component as a JSON-ready dict."""
        return asdict(self)


def libreoffice_component(config: KiConfig) -> ConverterComponent | None:
    """LibreOffice as a component, or None when ``components.libreoffice`` is empty (turned off)."""
    from ki.adapters.convert.soffice import INSTALL_HINT, find_soffice

    if not config.components.libreoffice:
        return None
    found = find_soffice(config.components.libreoffice) is not None
    return ConverterComponent("libreoffice", found, f"legacy Office and word-processor files ({LEGACY_FORMATS})",
                              None if found else f"not installed: those files wait as needs_converter; {INSTALL_HINT}")


def converter_components(config: KiConfig) -> list[ConverterComponent]:
    """LibreOffice (unless ``components.libreoffice`` is empty), the built-in OCR (unless
    ``pipeline.ocr.enabled`` is off) and Docling Serve (when its URL is set), in that order. OCR counts as
    available when its wheel and models are installed (:func:`ki.adapters.convert.ocr_engine.ocr_installed`: a
    report imports no onnxruntime); a run's start probes it for real."""
    from ki.adapters.convert.ocr_engine import ocr_installed

    office = libreoffice_component(config)
    out: list[ConverterComponent] = [office] if office else []
    if config.pipeline.ocr.enabled:
        found = ocr_installed()
        out.append(ConverterComponent("ocr", found, "scanned PDF pages and images",
                                      None if found else "the OCR wheel (rapidocr, onnxruntime) is not importable"))
    if config.components.docling_url:
        out.append(ConverterComponent("docling", True, "PPTX, XLSX, OpenDocument, EPUB; scans when preferred"))
    return out


def describe(component: ConverterComponent) -> str:
    """One line: ``libreoffice: available — legacy Office … (.doc …)`` or ``libreoffice: not installed: …``."""
    if component.available:
        return f"{component.name}: available — {component.adds}"
    return f"{component.name}: {component.missing}"
