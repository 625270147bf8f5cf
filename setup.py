"""mlte: multi-layer (packet + optical) SDN traffic engineering."""
from setuptools import find_namespace_packages, setup

setup(
    name="mlte",
    version="0.1.0",
    description="Multi-layer (packet + optical) SDN traffic engineering: OSCARS-TE with an OTTER LP PCE",
    python_requires=">=3.10",
    # namespace discovery: data-only folders (templates, static, migrations, lab data, examples) are packages too
    packages=find_namespace_packages(include=["app*", "ots_virtual*", "pce*", "monitor*", "topology*", "mininet_labs*"],
                                     exclude=["*__pycache__*", "*_build*"]),
    include_package_data=True,
    package_data={"app": ["*.toml"], "app.web.templates": ["*.html"], "app.web.static": ["*"],
                  "app.db.migrations": ["*.mako"], "mininet_labs.data": ["*.yaml", "*.json"],
                  "mininet_labs.delay": ["*.c", "*.h"], "pce.otter.examples": ["*.json"]},
    install_requires=[
        "os-ken==4.2.2",
        "eventlet>=0.36",
        "networkx>=3.2",
        "matplotlib>=3.7",
        "numpy>=1.24",
        "scipy>=1.10",
        "pulp>=2.8",
        "highspy>=1.7",
        "topohub>=0.1",
        "SQLAlchemy>=2.0",
        "alembic>=1.12",
        "Flask>=3.0",
        "Flask-WTF>=1.2",
        "waitress>=3.0",
        "psycopg[binary]>=3.1",
        "PyYAML>=6.0",
        "requests>=2.31",
        "etcd3gw>=2.7",
        "cryptography>=38",  # mlte pki: the CA and certificates for OpenFlow over TLS
        "prometheus-client>=0.20",  # GET /metrics on the controller and mlte web
    ],
    extras_require={
        "dev": [
            "pytest>=8",
            "pytest-timeout>=2.2",
            "pytest-xdist>=3.5",  # make test: the tests without OVS on both cores (Makefile)
            "hypothesis>=6.90",
            "schemathesis>=3.25",
            "playwright>=1.40",
            "ruff>=0.4",
            "import-linter>=2.1",
            "mypy>=1.10",
        ],
    },
    entry_points={"console_scripts": ["mlte=app.cli.main:main"]},
)
