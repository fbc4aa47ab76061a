"""index.html: a demo page for the converted model (placeholder until the full page lands)."""

from __future__ import annotations

from .graph import LoweredGraph


def render_demo_page(g: LoweredGraph, *, title: str, image_inputs: dict | None = None) -> str:
    return """<!doctype html>
<meta charset="utf-8">
<title>WebNN model</title>
<p id="status">Loading...</p>
<script type="module">
import * as model from "./model.js";
const status = document.getElementById("status");
if (!("ml" in navigator)) { status.textContent = "This browser has no WebNN (navigator.ml)."; }
else { status.textContent = "WebNN is available."; }
</script>
"""
