"""tether: keep the tools an AI agent calls tied to the data they describe."""

from tether.config import Project, TetherConfig, load_project
from tether.errors import ConfigError, ProductError, SourceError, TetherError

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "ProductError",
    "Project",
    "SourceError",
    "TetherConfig",
    "TetherError",
    "__version__",
    "load_project",
]
