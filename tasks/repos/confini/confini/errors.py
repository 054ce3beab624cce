class ConfigError(Exception):
    """Base class of all confini errors."""


class ParseError(ConfigError):
    """The text is not a valid configuration file."""

    def __init__(self, lineno, message):
        super().__init__(f"line {lineno}: {message}")
        self.lineno = lineno


class InterpolationError(ConfigError):
    """A ${...} reference cannot be resolved."""
