"""Where the project's files outside the package are: the pipeline source folders (bronze,
silver, gold) and the Lakeview dashboard (dashboards).

They live in the repo's src/, next to the package, because the bundle points the Databricks
pipeline and dashboard at those folders. A wheel carries them as package data under
``cdc_lakehouse/_src`` (setup.py maps them there), so an installed ``cdc-lakehouse run`` needs
no checkout. A checkout, and the editable install of ``make install``, reads them where they
are: an editable install maps packages to the checkout but has no way to make the package data
of a folder outside the package appear under it.

Only the standard library: the command line registers its commands on capture hosts too.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

PIPELINE_LAYERS = ("bronze", "silver", "gold")


def project_folder(name: str) -> Path:
    """``bronze``, ``silver``, ``gold`` or ``dashboards``: from the installed wheel, else from the
    checkout the package was imported from."""
    package = Path(str(files("cdc_lakehouse")))  # a folder: wheels install unzipped
    candidates = (package / "_src" / name, package.parent / name)
    for folder in candidates:
        if folder.is_dir():
            return folder
    raise LookupError(f"the installed cdc_lakehouse has no {name} folder (looked in "
                      f"{' and '.join(map(str, candidates))}): reinstall it from a wheel or a checkout")


def pipeline_sources() -> list[str]:
    """The project pipeline's files, as globs for the runtime's loader."""
    return [str(project_folder(layer) / "**" / "*.py") for layer in PIPELINE_LAYERS]


def dashboard_file() -> Path:
    return project_folder("dashboards") / "cdc_lakehouse.lvdash.json"
