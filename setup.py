"""Which files go into the wheel; everything else about the package is in pyproject.toml.

The pipeline source folders (src/bronze, src/silver, src/gold) and the Lakeview dashboard
(src/dashboards) stay next to the package: the bundle points the Databricks pipeline and
dashboard at them there. An installed wheel has no checkout to find them in, so it carries them
under cdc_lakehouse/_src/ (cdc_lakehouse/project_files.py looks them up). That maps folders from
outside the package into it, which pyproject.toml's `packages.find` cannot combine with the
packages it finds; data-files would install them outside the package, and an editable install
would copy them instead of using the checkout's.
"""

from setuptools import find_namespace_packages, find_packages, setup

PROJECT_FOLDERS = ("bronze", "silver", "gold", "dashboards")
PACKAGED = "cdc_lakehouse._src"


def project_folder_packages() -> list[str]:
    """Each folder and its subfolders (the pipeline's `**` globs reach them) as a package."""
    found = []
    for folder in PROJECT_FOLDERS:
        subfolders = find_namespace_packages(f"src/{folder}", exclude=["__pycache__", "*.__pycache__"])
        found += [f"{PACKAGED}.{folder}"] + [f"{PACKAGED}.{folder}.{sub}" for sub in subfolders]
    return found


setup(
    packages=find_packages("src", include=["cdc_lakehouse", "cdc_lakehouse.*"]) + project_folder_packages(),
    package_dir={"": "src", **{f"{PACKAGED}.{folder}": f"src/{folder}" for folder in PROJECT_FOLDERS}},
    package_data={
        "cdc_lakehouse.runtime": ["log4j2.properties"],
        f"{PACKAGED}.dashboards": ["*.lvdash.json"],
    },
)
