"""Hatchling build hook: the wheel carries the SAM application the CLI replays.

``template.yaml``, ``samconfig.toml``, the functions' code (``functions/<name>/app.py``, which the
replay imports) and the sample events (``events/``) go into the wheel as package data under
``batchpilot_local/sam_app/`` (``local/batchpilot_local/bundle.py`` finds them there). The editable
install ``make`` creates gets none of them: it uses the checkout's own files, so there is no stale
copy in site-packages. Build data ``force_include`` is hatchling's documented way for a hook to add
files (https://hatch.pypa.io/latest/plugins/builder/wheel/#build-data).
"""

from __future__ import annotations

from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

# Checkout path → path in the wheel.
SAM_APP = {
    "template.yaml": "batchpilot_local/sam_app/template.yaml",
    "samconfig.toml": "batchpilot_local/sam_app/samconfig.toml",
    "functions": "batchpilot_local/sam_app/functions",
    "events": "batchpilot_local/sam_app/events",
}


class SamAppHook(BuildHookInterface):
    """Adds :data:`SAM_APP` to every wheel except the editable one."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name == "wheel" and version != "editable":
            build_data["force_include"].update(SAM_APP)
