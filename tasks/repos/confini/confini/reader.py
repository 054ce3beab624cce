"""The ``Config`` object: sections of options with typed, interpolated getters."""

import re

from confini import values
from confini.errors import ConfigError, InterpolationError, ParseError
from confini.lexer import tokenize

DEFAULT_SECTION = "default"
_MISSING = object()
_REFERENCE = re.compile(r"\$\$|\$\{(?P<first>[^}:]+)(?::(?P<second>[^}]+))?\}")


class Config:
    """Parsed configuration; section and option names are case-insensitive."""

    def __init__(self):
        self._sections = {DEFAULT_SECTION: {}}

    @classmethod
    def from_string(cls, text):
        config = cls()
        config.read_string(text)
        return config

    @classmethod
    def from_file(cls, path, encoding="utf-8"):
        with open(path, encoding=encoding) as handle:
            return cls.from_string(handle.read())

    def read_string(self, text):
        section = None
        for entry in tokenize(text):
            if entry.kind == "section":
                section = self._sections.setdefault(entry.name.lower(), {})
            elif section is None:
                raise ParseError(entry.lineno, f"option {entry.name!r} before any [section]")
            else:
                section[entry.name.lower()] = values.unquote(entry.value)

    def sections(self):
        """Section names in file order, without DEFAULT."""
        return [name for name in self._sections if name != DEFAULT_SECTION]

    def has_section(self, section):
        return section.lower() in self._sections

    def options(self, section):
        """Option names of ``section``, including those inherited from DEFAULT."""
        own = self._section(section)
        inherited = [name for name in self._sections[DEFAULT_SECTION] if name not in own]
        return list(own) + inherited

    def has_option(self, section, option):
        if not self.has_section(section):
            return False
        option = option.lower()
        return option in self._section(section) or option in self._sections[DEFAULT_SECTION]

    def _section(self, section):
        try:
            return self._sections[section.lower()]
        except KeyError:
            raise ConfigError(f"no section [{section}]; sections: {self.sections()}") from None

    def _raw(self, section, option):
        own = self._section(section)
        if option in own:
            return own[option]
        if option in self._sections[DEFAULT_SECTION]:
            return self._sections[DEFAULT_SECTION][option]
        raise KeyError(option)

    def _interpolate(self, section, value):
        def replace(match):
            if match.group(0) == "$$":
                return "$"
            if match.group("second") is None:
                ref_section, ref_option = section, match.group("first")
            else:
                ref_section, ref_option = match.group("first"), match.group("second")
            try:
                return self._raw(ref_section, ref_option.lower())
            except (KeyError, ConfigError):
                raise InterpolationError(
                    f"cannot resolve {match.group(0)} in section [{section}]"
                ) from None

        return _REFERENCE.sub(replace, value)

    def get(self, section, option, default=_MISSING, raw=False):
        """The option's value with ${...} references resolved (unless ``raw``)."""
        try:
            value = self._raw(section, option)
        except KeyError:
            if default is not _MISSING:
                return default
            raise ConfigError(f"no option {option!r} in section [{section}]") from None
        return value if raw else self._interpolate(section, value)

    def get_int(self, section, option, default=_MISSING):
        value = self.get(section, option, default)
        return value if value is default else values.to_int(value)

    def get_bool(self, section, option, default=_MISSING):
        value = self.get(section, option, default)
        return value if value is default else values.to_bool(value)

    def get_list(self, section, option, default=_MISSING):
        value = self.get(section, option, default)
        return value if value is default else values.to_list(value)
