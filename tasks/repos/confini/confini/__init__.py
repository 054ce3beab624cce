"""INI-style configuration files with typed getters and interpolation."""

from confini.errors import ConfigError, InterpolationError, ParseError
from confini.reader import Config

__all__ = ["Config", "ConfigError", "InterpolationError", "ParseError"]
